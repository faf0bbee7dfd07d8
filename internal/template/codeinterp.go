package template

import "slices"

// PythonPackage is a package of code-interpreter-v1's Python: its name on
// PyPI, the version the recipe asks for (a prefix: 3.10 is any 3.10.x; ""
// any; E2B's where E2B's code-interpreter-v1 has the package) and the
// module code imports.
type PythonPackage struct {
	Dist, Version, Module string
}

// CodeInterpreterPython are code-interpreter-v1's Python packages, which
// code written for it imports freely: E2B's and the ones Cove adds. They
// are what recipes/code-interpreter.in asks PyPI for (at these versions),
// what docs/GUIDE.md lists and what the compatibility suite imports.
var CodeInterpreterPython = slices.Concat(CodeInterpreterE2B, CodeInterpreterAdded)

// CodeInterpreterE2B are the Python packages E2B's code-interpreter-v1
// carries, at its versions.
var CodeInterpreterE2B = []PythonPackage{
	{"jupyter-server", "2.20", "jupyter_server"},
	{"ipykernel", "6.31", "ipykernel"},
	{"ipython", "9.15", "IPython"},
	{"orjson", "3.11", "orjson"},
	{"pandas", "2.2.3", "pandas"},
	{"matplotlib", "3.10", "matplotlib"},
	{"pillow", "12.3", "PIL"},
	{"e2b-charts", "", "e2b_charts"},
	{"aiohttp", "3.14", "aiohttp"},
	{"beautifulsoup4", "4.15", "bs4"},
	{"bokeh", "3.9", "bokeh"},
	{"gensim", "4.4", "gensim"},
	{"imageio", "2.37", "imageio"},
	{"joblib", "1.5", "joblib"},
	{"librosa", "0.11", "librosa"},
	{"nltk", "3.10", "nltk"},
	{"numpy", "2.3.5", "numpy"},
	{"numba", "0.66", "numba"},
	{"opencv-python", "4.11", "cv2"},
	{"openpyxl", "3.1", "openpyxl"},
	{"plotly", "6.0", "plotly"},
	{"kaleido", "1.3", "kaleido"},
	{"pytest", "9.0", "pytest"},
	{"python-docx", "1.1", "docx"},
	{"pytz", "2025.2", "pytz"},
	{"requests", "2.33", "requests"},
	{"scikit-image", "0.25", "skimage"},
	{"scikit-learn", "1.6", "sklearn"},
	{"scipy", "1.17", "scipy"},
	{"seaborn", "0.13", "seaborn"},
	{"soundfile", "0.13", "soundfile"},
	{"spacy", "3.8", "spacy"},
	{"textblob", "0.19", "textblob"},
	{"tornado", "6.5", "tornado"},
	{"urllib3", "2.7", "urllib3"},
	{"xarray", "2025.4", "xarray"},
	{"xlrd", "2.0", "xlrd"},
	{"sympy", "1.14", "sympy"},
}

// CodeInterpreterAdded are packages E2B's code-interpreter-v1 lacks that
// code models write for data analysis imports often: statistics
// (statsmodels), Parquet and Arrow (pyarrow), DataFrame.to_markdown
// (tabulate), other data frames and SQL over them (polars, duckdb,
// sqlalchemy), Excel with formats (xlsxwriter), graphs (networkx), and
// what E2B's packages already pull in but code imports itself (lxml, yaml,
// rich, tqdm), named here so that they stay. A package of hundreds of MB
// (xgboost's wheel carries CUDA) is left to a template built over it.
var CodeInterpreterAdded = []PythonPackage{
	{"statsmodels", "0.15", "statsmodels"},
	{"pyarrow", "26.0", "pyarrow"},
	{"tabulate", "0.10", "tabulate"},
	{"polars", "2.2", "polars"},
	{"duckdb", "2.0", "duckdb"},
	{"sqlalchemy", "2.1", "sqlalchemy"},
	{"xlsxwriter", "3.3", "xlsxwriter"},
	{"networkx", "3.7", "networkx"},
	{"lxml", "6.2", "lxml"},
	{"pyyaml", "6.0", "yaml"},
	{"rich", "15.0", "rich"},
	{"tqdm", "4.70", "tqdm"},
}
