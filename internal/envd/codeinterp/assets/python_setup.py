# Cove's set-up of an IPython kernel for the code interpreter; runs once,
# silently, when the kernel starts. Names start with __cove_ and are
# deleted at the end, so the user's namespace stays clean.
import os as __cove_os
__cove_os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
del __cove_os
