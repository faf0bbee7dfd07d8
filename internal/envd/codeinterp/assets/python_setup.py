# Cove's set-up of an IPython kernel for the code interpreter; runs once,
# silently, when the kernel starts. It adds what E2B's results carry: a
# chart read out of each matplotlib figure (e2b/chart), a DataFrame's data
# (e2b/data), and PIL's Image.show() as a display. Its names start with
# __cove_ and the user's namespace keeps none of them but the formatters.


def __cove_setup():
    import json
    import math
    import os
    import re
    import sys

    from IPython import get_ipython
    from IPython.core.formatters import BaseFormatter
    from traitlets import Unicode

    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    ip = get_ipython()

    def number(v):
        try:
            f = float(v)
        except (TypeError, ValueError):
            return str(v)
        if math.isnan(f) or math.isinf(f):
            return None
        return int(f) if f.is_integer() else f

    def unit(label):
        m = re.search(r"[\(\[]\s*([^\)\]]+?)\s*[\)\]]\s*$", label or "")
        return m.group(1) if m else None

    def scale(axis):
        # get_converter() where matplotlib has it (3.10 deprecates reading
        # axis.converter, with a warning on the user's stderr).
        get = getattr(axis, "get_converter", None)
        conv = get() if get is not None else getattr(axis, "converter", None)
        name = type(conv).__name__ if conv is not None else ""
        if "Date" in name:
            return "datetime"
        if "Category" in name:
            return "categorical"
        return axis.get_scale()

    def values(axis, data):
        kind = scale(axis)
        out = []
        for v in data:
            if kind == "datetime":
                import matplotlib.dates as mdates

                out.append(mdates.num2date(float(v)).isoformat())
            elif kind == "categorical":
                names = {number(pos): name for name, pos in getattr(axis.get_units(), "_mapping", {}).items()}
                out.append(names.get(number(v), str(v)))
            else:
                out.append(number(v))
        return out

    def ticks(axis):
        locs = list(axis.get_majorticklocs())
        fmt = axis.get_major_formatter()
        try:
            labels = [str(t) for t in fmt.format_ticks(locs)]
        except Exception:
            labels = [str(t) for t in locs]
        return values(axis, locs), labels

    def text(s):  # a title or label not given is null, as E2B's
        return s or None

    def axes2d(ax, kind):
        c = {"type": kind, "title": text(ax.get_title()), "elements": []}
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            label = axis.get_label_text()
            c[name + "_label"] = text(label)
            c[name + "_unit"] = unit(label)
        return c

    def point_chart(ax, kind, series):
        c = axes2d(ax, kind)
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            c[name + "_ticks"], c[name + "_tick_labels"] = ticks(axis)
            c[name + "_scale"] = scale(axis)
        for label, xs, ys in series:
            c["elements"].append({"label": label, "points": [list(p) for p in zip(values(ax.xaxis, xs), values(ax.yaxis, ys))]})
        return c

    def visible_label(artist):
        label = artist.get_label() or ""
        return "" if label.startswith("_") else label

    def tick_label_at(ax, x):
        locs, labels = ticks(ax.xaxis)
        best = None
        for loc, text in zip(ax.xaxis.get_majorticklocs(), labels):
            if best is None or abs(loc - x) < abs(best[0] - x):
                best = (loc, text)
        return best[1] if best else str(number(x))

    def box_chart(ax, lines):
        import numpy as np
        from matplotlib.patches import PathPatch

        def rectangle(xy):  # a closed outline of 2 xs and 2 ys: a box
            if len(xy) not in (5, 6):  # a patch's path may end with a CLOSEPOLY vertex
                return None
            xs, ys = xy[:5, 0], xy[:5, 1]
            if xs[0] == xs[4] and ys[0] == ys[4] and len(set(xs)) == 2 and len(set(ys)) == 2:
                return (min(xs), max(xs), min(ys), max(ys))
            return None

        # Boxes are lines, or patches with patch_artist=True.
        outlines = [np.asarray(ln.get_xydata(), float) for ln in lines]  # through the axes' units: dates, categories
        outlines += [np.asarray(p.get_path().vertices, float) for p in ax.patches if isinstance(p, PathPatch)]
        boxes = [b for b in map(rectangle, outlines) if b is not None]
        if not boxes:
            return None
        c = axes2d(ax, "box_and_whisker")
        for x0, x1, q1, q3 in boxes:
            mid = (x0 + x1) / 2
            median, low, high, outliers = None, q1, q3, []
            for ln in lines:
                xy = np.asarray(ln.get_xydata(), float)
                xs, ys = xy[:, 0], xy[:, 1]
                if len(xs) == 2 and ys[0] == ys[1] and x0 <= xs.min() and xs.max() <= x1 and q1 <= ys[0] <= q3 and xs[0] != xs[1]:
                    median = ys[0]
                elif len(xs) == 2 and xs[0] == xs[1] == mid:
                    low, high = min(low, ys.min()), max(high, ys.max())
                elif ln.get_linestyle() in ("None", "", " ") and len(xs) and np.allclose(xs, mid):
                    outliers = [number(v) for v in ys]
            c["elements"].append({"label": tick_label_at(ax, mid), "min": number(low), "first_quartile": number(q1),
                                  "median": number(median), "third_quartile": number(q3), "max": number(high),
                                  "outliers": outliers})
        return c

    def axes_chart(ax):
        from matplotlib.collections import PathCollection
        from matplotlib.container import BarContainer
        from matplotlib.patches import Wedge

        wedges = [p for p in ax.patches if isinstance(p, Wedge)]
        if wedges:
            c = {"type": "pie", "title": text(ax.get_title()), "elements": []}
            for w in wedges:
                # Rounded as E2B's are: matplotlib's angles are float32's.
                c["elements"].append({"label": visible_label(w), "angle": number(round(w.theta2 - w.theta1, 4)),
                                      "radius": number(round(w.r, 4))})
            return c
        bars = [b for b in ax.containers if isinstance(b, BarContainer)]
        if bars:
            c = axes2d(ax, "bar")
            for b in bars:
                group = visible_label(b)
                for rect in b.patches:
                    c["elements"].append({"label": tick_label_at(ax, rect.get_x() + rect.get_width() / 2),
                                          "group": group, "value": number(rect.get_height())})
            return c
        lines = ax.get_lines()
        box = box_chart(ax, lines)
        if box is not None:
            return box
        scatters = [col for col in ax.collections if isinstance(col, PathCollection)]
        if scatters and not lines:
            return point_chart(ax, "scatter", [(visible_label(s), s.get_offsets()[:, 0], s.get_offsets()[:, 1]) for s in scatters])
        if lines:
            return point_chart(ax, "line", [(visible_label(ln), ln.get_xydata()[:, 0], ln.get_xydata()[:, 1]) for ln in lines])
        return {"type": "unknown", "title": text(ax.get_title()), "elements": []}

    def figure_chart(fig):
        try:
            axes = [ax for ax in fig.get_axes() if ax.has_data()]
            if not axes:
                return None
            charts = [axes_chart(ax) for ax in axes]
            if len(charts) == 1:
                return json.loads(json.dumps(charts[0]))
            title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else None
            return json.loads(json.dumps({"type": "superchart", "title": text(title), "elements": charts}))
        except Exception:
            return {"type": "unknown", "title": None, "elements": []}

    def frame_data(df):
        try:
            return json.loads(df.to_json(orient="columns", date_format="iso", default_handler=str))
        except Exception:
            return None

    def instance_of(obj, module, name):
        return any(c.__module__ == module and c.__name__ == name for c in type(obj).__mro__)

    # The formatters look at the object's class themselves: matplotlib's
    # inline backend takes Figure out of every formatter's registry when
    # pyplot is imported.
    class ChartFormatter(BaseFormatter):
        format_type = Unicode("e2b/chart")
        _return_type = (dict,)

        def __call__(self, obj):
            return figure_chart(obj) if instance_of(obj, "matplotlib.figure", "Figure") else None

    class DataFormatter(BaseFormatter):
        format_type = Unicode("e2b/data")
        _return_type = (dict,)

        def __call__(self, obj):
            return frame_data(obj) if instance_of(obj, "pandas.core.frame", "DataFrame") else None

    ip.display_formatter.formatters["e2b/chart"] = ChartFormatter(parent=ip.display_formatter)
    ip.display_formatter.formatters["e2b/data"] = DataFormatter(parent=ip.display_formatter)
    ip.display_formatter.active_types = list(ip.display_formatter.active_types) + ["e2b/chart", "e2b/data"]

    try:  # PIL's show() opens a viewer: here it displays the image
        from PIL import Image
        from IPython.display import display

        def show(self, *args, **kwargs):
            display(self)

        Image.Image.show = show

        # An image saved to a file is displayed too, as E2B's are (saved
        # to memory, as its PNG display does, it is not).
        save = Image.Image.save

        def save_and_show(self, fp, *args, **kwargs):
            out = save(self, fp, *args, **kwargs)
            if isinstance(fp, (str, os.PathLike)):
                display(self)
            return out

        Image.Image.save = save_and_show
    except ImportError:
        pass

__cove_setup()
del __cove_setup
