"""glsb's display protocol, without IPython: what a value shows as (its MIME bundle), display(),
matplotlib figures as Jupyter's inline backend shows them, and a figure's chart data.

Loaded only when a cell needs it (a value to show, a display() call, a figure to render): importing
this module imports nothing beyond the interpreter's own start-up modules, and matplotlib, pandas,
base64, io, re and decimal are touched only when what is shown needs them.

Who uses it:
  * the local agent (agent.py): sets the publisher (a "res" frame to the host, PROTOCOL.md) and calls
    bundle() for the cell's last value, display() from the code, flush_figures() at the end of a cell,
    and its import hook asks MatplotlibFinder and IPythonFinder (IPython.display where IPython is absent);
  * the Bedrock adapter's cell wrapper (providers/bedrock/cell.lua): the same, into its verdict;
  * the E2B emulator's kernel (spec/emulators/e2b/driver.py), standing in for IPython's formatters,
    matplotlib-inline and E2B's chart extraction (e2b-dev/code-interpreter chart_data_extractor).

A bundle is (forms, extra): forms maps the short names glsb.results uses (text, html, markdown, svg,
png, jpeg, pdf, latex, json, javascript) to str, bytes (png, jpeg, pdf) or, for json, a JSON value;
extra holds what is not a form (chart: the figure's structure, with E2B's field names; other MIME
types by their MIME type).

The rules, as IPython's DisplayFormatter has them: an object's _repr_mimebundle_(include, exclude)
first, then each _repr_<form>_ method; a method may return the data or (data, metadata); None means
"not this form"; one that raises is reported on stderr and skipped. text is repr(obj), a string's
without its outer quotes (what E2B's server does to every text/plain). A matplotlib Figure is its
PNG (the figure drawn with bbox_inches="tight", as matplotlib-inline prints it), its repr and its
chart.
"""
import sys

FORM_OF_MIME = {
    "text/plain": "text", "text/html": "html", "text/markdown": "markdown", "image/svg+xml": "svg",
    "image/png": "png", "image/jpeg": "jpeg", "application/pdf": "pdf", "text/latex": "latex",
    "application/json": "json", "application/javascript": "javascript",
}
METHODS = (("html", "_repr_html_"), ("markdown", "_repr_markdown_"), ("svg", "_repr_svg_"),
           ("png", "_repr_png_"), ("jpeg", "_repr_jpeg_"), ("pdf", "_repr_pdf_"), ("latex", "_repr_latex_"),
           ("json", "_repr_json_"), ("javascript", "_repr_javascript_"))
BINARY = frozenset(("png", "jpeg", "pdf"))
# Values of these types have no rich forms: their bundle is their text (no attribute lookups).
PLAIN = (int, float, complex, str, bytes, bool, list, tuple, dict, set, frozenset, range, type(None))

# publisher(forms, extra, is_main_result): where bundles go; set by the user of this module.
_publisher = None


def set_publisher(fn):
    global _publisher
    _publisher = fn


def _warn(what, e):
    try:
        sys.stderr.write("glsb display: %s failed: %s: %s\n" % (what, type(e).__name__, e))
    except Exception:
        pass


def text_of(obj):
    """repr(obj) as E2B's server shows text/plain: a string's repr without its outer quotes."""
    try:
        text = repr(obj)
    except Exception as e:
        _warn("repr", e)
        return "<unprintable %s>" % type(obj).__name__
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return text


def _binary(value):
    """bytes of a binary form: bytes as they are, str as base64 (IPython accepts either)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        import base64
        try:
            return base64.b64decode(value, validate=False)
        except ValueError:
            return None
    return None


def _accept(forms, extra, form, value):
    if isinstance(value, tuple) and len(value) == 2:
        value = value[0]  # (data, metadata)
    if value is None:
        return
    if form in BINARY:
        value = _binary(value)
        if value is None:
            return
    elif form == "json":
        if isinstance(value, (bytes, str)):
            import json
            try:
                value = json.loads(value)
            except ValueError:
                return
    elif isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    elif not isinstance(value, str):
        value = str(value)
    forms[form] = value


def _is_figure(obj):
    figure = sys.modules.get("matplotlib.figure")
    return figure is not None and isinstance(obj, figure.Figure)


def bundle(obj):
    """(forms, extra) of obj, as IPython's formatters would show it."""
    forms = {"text": text_of(obj)}
    extra = {}
    if isinstance(obj, PLAIN):
        return forms, extra
    if _is_figure(obj):
        return figure_bundle(obj)
    mimebundle = getattr(obj, "_repr_mimebundle_", None)
    if callable(mimebundle) and not isinstance(obj, type):
        try:
            data = mimebundle(include=None, exclude=None)
        except Exception as e:
            _warn("_repr_mimebundle_", e)
            data = None
        if isinstance(data, tuple) and len(data) == 2:
            data = data[0]
        if isinstance(data, dict):
            for mime, value in data.items():
                form = FORM_OF_MIME.get(mime)
                if form is not None:
                    _accept(forms, extra, form, value)
                elif isinstance(mime, str):
                    extra[mime] = value
    for form, name in METHODS:
        if form in forms:
            continue
        method = getattr(obj, name, None)
        if method is None or not callable(method) or isinstance(obj, type):
            continue
        try:
            value = method()
        except Exception as e:
            _warn(name, e)
            continue
        _accept(forms, extra, form, value)
    return forms, extra


def publish(forms, extra, main=False):
    if _publisher is not None:
        _publisher(forms, extra, main)


def display(*objs, **kwargs):
    """IPython's display(): one bundle per object, in order. raw=True takes each object as a
    {mime: data} dict already (IPython's display(..., raw=True))."""
    for obj in objs:
        if kwargs.get("raw") and isinstance(obj, dict):
            forms, extra = {}, {}
            for mime, value in obj.items():
                form = FORM_OF_MIME.get(mime)
                if form is not None:
                    _accept(forms, extra, form, value)
                else:
                    extra[str(mime)] = value
        else:
            forms, extra = bundle(obj)
        publish(forms, extra, False)


# ---------------------------------------------------------------- matplotlib

def figure_png(fig):
    """The figure as matplotlib-inline prints it: PNG at the figure's dpi, bbox_inches="tight"."""
    import io
    buf = io.BytesIO()
    fig.canvas.print_figure(buf, format="png", bbox_inches="tight", dpi=fig.dpi,
                            facecolor=fig.get_facecolor(), edgecolor=fig.get_edgecolor())
    return buf.getvalue()


def figure_bundle(fig):
    forms = {"text": text_of(fig)}
    extra = {}
    try:
        forms["png"] = figure_png(fig)
    except Exception as e:
        _warn("drawing a figure", e)
        return forms, extra
    # after drawing: tick labels are only known once the figure has been drawn
    try:
        c = chart(fig)
    except Exception:
        c = None  # as E2B's formatter: a figure it cannot read has no chart
    if c:
        extra["chart"] = c
    return forms, extra


def flush_figures():
    """Shows every figure pyplot still has open, in order, then closes them (the inline backend's
    end of a cell). Nothing when pyplot was never imported."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    try:
        from matplotlib._pylab_helpers import Gcf
        managers = list(Gcf.get_all_fig_managers())
    except Exception:
        return
    if not managers:
        return
    try:
        for manager in managers:
            forms, extra = figure_bundle(manager.canvas.figure)
            publish(forms, extra, False)
    finally:
        pyplot.close("all")


def backend_attrs():
    """The attributes of the matplotlib backend "module://glsb_inline" (LazyBackend, selected by
    select_backend): an Agg canvas whose show() displays every open figure and closes them, as
    matplotlib-inline's does; fig.show() displays one."""
    from matplotlib.backend_bases import FigureManagerBase
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    class FigureManager(FigureManagerBase):
        def show(self):
            forms, extra = figure_bundle(self.canvas.figure)
            publish(forms, extra, False)

    class FigureCanvas(FigureCanvasAgg):
        manager_class = FigureManager

    def show(*args, **kwargs):
        flush_figures()

    def draw_if_interactive():
        pass

    return {"FigureCanvas": FigureCanvas, "FigureManager": FigureManager, "show": show,
            "draw_if_interactive": draw_if_interactive, "backend_version": "glsb"}


class LazyBackend(type(sys)):
    """The module "glsb_inline": its attributes (backend_attrs) are made when matplotlib first reads
    one, after matplotlib has imported itself."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if "FigureCanvas" not in self.__dict__:
            self.__dict__.update(backend_attrs())
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(name) from None


BACKEND = "module://glsb_inline"


def select_backend(matplotlib):
    """Makes "module://glsb_inline" matplotlib's backend, unless the environment names one (MPLBACKEND),
    as ipykernel makes matplotlib-inline the kernel's."""
    import os
    if os.environ.get("MPLBACKEND"):
        return
    sys.modules.setdefault("glsb_inline", LazyBackend("glsb_inline"))
    try:
        matplotlib.rcParams["backend"] = BACKEND
    except Exception as e:
        _warn("selecting the inline backend", e)


class _AfterImport:
    """matplotlib's own loader, then select_backend."""

    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        select_backend(module)


def _others_spec(name, path, target):
    """The spec the finders of sys.meta_path that are not glsb's give (glsb's are marked glsb_hook)."""
    for finder in list(sys.meta_path):
        if getattr(finder, "glsb_hook", False):
            continue
        find = getattr(finder, "find_spec", None)
        spec = find(name, path, target) if find is not None else None
        if spec is not None:
            return spec
    return None


class MatplotlibFinder:
    """A sys.meta_path finder for the one name "matplotlib": the spec the other finders give, with a
    loader that selects the inline backend once matplotlib has run. Nothing is imported before the
    code imports matplotlib; the finder leaves sys.meta_path then."""

    glsb_hook = True

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "matplotlib":
            return None
        if MatplotlibFinder in sys.meta_path:
            sys.meta_path.remove(MatplotlibFinder)
        spec = _others_spec(name, path, target)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _AfterImport(spec.loader)
        return spec


def install_backend_hook():
    """The inline backend for this interpreter: at once if matplotlib is loaded, else when it is."""
    matplotlib = sys.modules.get("matplotlib")
    if matplotlib is not None:
        select_backend(matplotlib)
    elif MatplotlibFinder not in sys.meta_path:
        sys.meta_path.insert(0, MatplotlibFinder)


# ---------------------------------------------------------------- IPython.display, where IPython is absent
#
# Code written for Jupyter imports its display classes from IPython.display. Where IPython is not
# installed, IPythonFinder gives the modules IPython, IPython.display, IPython.core and
# IPython.core.display made of what follows: display(), the display classes (HTML, Markdown, Latex,
# SVG, JSON, Javascript, Image, Pretty), clear_output() (nothing to clear) and get_ipython() (None:
# there is no shell). An installed IPython is always found first.

class DisplayObject:
    """IPython.display's base: data, or the contents of filename; url is kept, never fetched."""

    form = "text"

    def __init__(self, data=None, url=None, filename=None, metadata=None):
        if data is None and filename is not None:
            with open(filename, "rb" if self.form in BINARY else "r") as f:
                data = f.read()
        self.data, self.url, self.filename, self.metadata = data, url, filename, metadata

    def __repr__(self):
        return "<IPython.core.display.%s object>" % type(self).__name__


def _display_class(name, form):
    def method(self):
        data = self.data if self.data is not None else self.url
        if form == "json" and isinstance(data, (str, bytes)):
            import json
            data = json.loads(data)
        return data
    return type(name, (DisplayObject,), {"form": form, "_repr_%s_" % form: method})


HTML = _display_class("HTML", "html")
Markdown = _display_class("Markdown", "markdown")
Latex = _display_class("Latex", "latex")
SVG = _display_class("SVG", "svg")
JSON = _display_class("JSON", "json")
Javascript = _display_class("Javascript", "javascript")


class Pretty(DisplayObject):
    def __repr__(self):
        return str(self.data)


class Image(DisplayObject):
    """A PNG or a JPEG: format png / jpeg (jpg), else told by the file's name or its first bytes."""

    form = "png"

    def __init__(self, data=None, url=None, filename=None, format=None, **kwargs):
        if isinstance(data, str) and filename is None and url is None and "\n" not in data and len(data) < 4096:
            filename, data = data, None  # Image("plot.png"), as IPython takes a path
        DisplayObject.__init__(self, data, url, filename, kwargs.get("metadata"))
        fmt = (format or "").lower()
        if not fmt and filename:
            fmt = filename.rsplit(".", 1)[-1].lower()
        if not fmt and isinstance(self.data, bytes):
            fmt = "jpeg" if self.data[:2] == b"\xff\xd8" else "png"
        self.format = "jpeg" if fmt in ("jpg", "jpeg") else "png"

    def _repr_png_(self):
        return self.data if self.format == "png" else None

    def _repr_jpeg_(self):
        return self.data if self.format == "jpeg" else None


def clear_output(wait=False):
    """Nothing to clear: results are a list, not a notebook's output area."""


def update_display(obj, **kwargs):
    display(obj)


def publish_display_data(data, metadata=None, **kwargs):
    display(data, raw=True)


def get_ipython():
    return None


_IPYTHON_NAMES = ("IPython", "IPython.display", "IPython.core", "IPython.core.display")
_shims = {}


def _shim(name):
    if not _shims:
        names = {"display": display, "clear_output": clear_output, "update_display": update_display,
                 "publish_display_data": publish_display_data, "DisplayObject": DisplayObject, "HTML": HTML,
                 "Markdown": Markdown, "Latex": Latex, "SVG": SVG, "JSON": JSON, "Javascript": Javascript,
                 "Image": Image, "Pretty": Pretty}
        for n in _IPYTHON_NAMES:
            mod = type(sys)(n)
            mod.__doc__ = "glsb's stand-in for %s (IPython is not installed here)" % n
            mod.__dict__.update(names)
            mod.get_ipython = get_ipython
            if n in ("IPython", "IPython.core"):
                mod.__path__ = []
            _shims[n] = mod
        _shims["IPython"].display = _shims["IPython.display"]
        _shims["IPython"].core = _shims["IPython.core"]
        _shims["IPython.core"].display = _shims["IPython.core.display"]
    return _shims[name]


class _ShimLoader:
    @staticmethod
    def create_module(spec):
        return _shim(spec.name)

    @staticmethod
    def exec_module(module):
        pass


class IPythonFinder:
    """A sys.meta_path finder for IPython's display modules: the installed IPython when there is one,
    else glsb's stand-in."""

    glsb_hook = True

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in _IPYTHON_NAMES:
            return None
        parent = sys.modules.get("IPython")
        if name != "IPython" and parent is not _shims.get("IPython"):
            return None  # a submodule of the installed IPython, or of none
        if name == "IPython":
            spec = _others_spec(name, path, target)
            if spec is not None:
                return spec
        import importlib.util
        return importlib.util.spec_from_loader(name, _ShimLoader, is_package=name in ("IPython", "IPython.core"))


def install_ipython_shim():
    """IPython's display modules for this interpreter, where IPython is not installed."""
    if IPythonFinder not in sys.meta_path:
        sys.meta_path.insert(0, IPythonFinder)


# ---------------------------------------------------------------- charts
#
# A figure's structure for a reader without vision, with the field names and the rules of E2B's
# chart extraction (e2b-dev/code-interpreter, chart_data_extractor/e2b_charts): one axes gives a
# chart of its type (line, scatter, bar, pie, box_and_whisker, unknown), several give a "superchart"
# of them, a figure without data gives none.

def _none_if_empty(s):
    return s if s else None


def _unit(label):
    if not label:
        return None
    import re
    m = re.search(r"\s\((.*?)\)|\[(.*?)\]", label)
    if not m:
        return None
    return m.group(1) or m.group(2)


def _round(x):
    """x to 8 significant digits counted from the decimal point's side of its magnitude (E2B's
    dynamic_round: precision max(1, 8 - the exponent of its leading digit))."""
    from decimal import Decimal, localcontext
    d = Decimal(str(x))
    with localcontext() as ctx:
        ctx.prec = max(1, 8 - d.adjusted())
        return float(+d)


def _is_grid_line(line):
    xs, ys = line.get_xdata(), line.get_ydata()
    if len(xs) != 2 or len(ys) != 2:
        return False
    return bool(xs[0] == xs[1] or ys[0] == ys[1])


def _chart_type(ax):
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import PathPatch, Rectangle, Wedge
    from matplotlib.text import Text
    artists = [a for a in getattr(ax, "_children", ()) if not isinstance(a, Text)]
    if all(isinstance(a, Line2D) for a in artists):
        return "line"
    if all(isinstance(a, (PathPatch, Line2D)) for a in artists):
        return "box_and_whisker"
    artists = [a for a in artists if not (isinstance(a, Line2D) and _is_grid_line(a))]
    for kind, cls in (("scatter", PathCollection), ("pie", Wedge), ("bar", Rectangle)):
        if all(isinstance(a, cls) for a in artists):
            return kind
    return "unknown"


def _labels_2d(ax, c):
    c["x_label"] = _none_if_empty(ax.get_xlabel())
    c["y_label"] = _none_if_empty(ax.get_ylabel())
    c["x_unit"] = _unit(c["x_label"])
    c["y_unit"] = _unit(c["y_label"])


def _swap_axes(c):
    c["x_label"], c["y_label"] = c["y_label"], c["x_label"]
    c["x_unit"], c["y_unit"] = c["y_unit"], c["x_unit"]


def _is_date_converter(converter):
    dates = sys.modules.get("matplotlib.dates")
    cls = getattr(dates, "_SwitchableDateConverter", None) if dates else None
    return cls is not None and isinstance(converter, cls)


def _number(v):
    if isinstance(v, bool):
        return v
    try:
        import numbers
        if isinstance(v, numbers.Real):
            return float(v)
    except Exception:
        pass
    return v


def _point(v):
    import datetime
    if isinstance(v, datetime.date):
        return v.isoformat()
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(v, numpy.datetime64):
        return str(v.astype("datetime64[s]"))
    if numpy is not None and isinstance(v, numpy.generic):
        v = v.item()
    if isinstance(v, str):
        return v
    return _number(v)


def _ticks(converter, ticks):
    if _is_date_converter(converter):
        from matplotlib.dates import num2date
        return [num2date(t).isoformat() for t in ticks]
    ticks = list(ticks)
    if isinstance(_number(ticks[0]), float):  # no ticks: no chart, as E2B's extraction fails there too
        return [float(t) for t in ticks]
    return ticks


def _scale(converter, scale, ticks, labels):
    if _is_date_converter(converter):
        return "datetime"
    if scale != "linear":
        return scale
    for i, (tick, label) in enumerate(zip(ticks, labels)):
        if isinstance(tick, (int, float)) and tick == i and str(i) != label:
            continue
        return "linear"
    return "categorical"


def _point_chart(ax, c):
    _labels_2d(ax, c)
    for axis, name in ((ax.xaxis, "x"), (ax.yaxis, "y")):
        labels = [t.get_text() for t in (ax.get_xticklabels() if name == "x" else ax.get_yticklabels())]
        ticks = _ticks(axis.converter, ax.get_xticks() if name == "x" else ax.get_yticks())
        c[name + "_ticks"] = ticks
        c[name + "_tick_labels"] = labels
        c[name + "_scale"] = _scale(axis.converter, ax.get_xscale() if name == "x" else ax.get_yscale(),
                                    ticks, labels)


def _line_chart(ax, c):
    _point_chart(ax, c)
    for line in ax.get_lines():
        if _is_grid_line(line):
            continue
        label = line.get_label()
        if label.startswith("_child"):
            label = "Line %d" % int(label[6:])
        points = [[_point(x), _point(y)] for x, y in zip(line.get_xdata(), line.get_ydata())]
        c["elements"].append({"label": label, "points": points})


def _scatter_chart(ax, c):
    _point_chart(ax, c)
    for collection in ax.collections:
        points = [[_point(x), _point(y)] for x, y in collection.get_offsets()]
        c["elements"].append({"label": collection.get_label(), "points": points})


def _bar_chart(ax, c):
    _labels_2d(ax, c)
    for container in ax.containers:
        group = container.get_label()
        if group.startswith("_container"):
            group = "Group %d" % int(group[10:])
        heights = [rect.get_height() for rect in container]
        if all(h == heights[0] for h in heights):
            # every bar as high as the others: read as horizontal bars (barh), values their widths
            _swap_axes(c)
            labels = [t.get_text() for t in ax.get_yticklabels()]
            values = [rect.get_width() for rect in container]
        else:
            labels = [t.get_text() for t in ax.get_xticklabels()]
            values = heights
        for label, value in zip(labels, values):
            c["elements"].append({"label": label, "group": group, "value": float(value)})


def _pie_chart(ax, c):
    for wedge in ax.patches:
        c["elements"].append({"label": wedge.get_label(),
                              "angle": abs(_round(float(wedge.theta2) - float(wedge.theta1))),
                              "radius": float(wedge.r)})


def _box_chart(ax, c):
    _labels_2d(ax, c)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    boxes = []
    for label, patch in zip(labels, ax.patches):
        vertices = patch.get_path().vertices
        xs = [_round(v) for v in vertices[:, 0]]
        ys = [_round(v) for v in vertices[:, 1]]
        x, y = min(xs), min(ys)
        boxes.append({"x": x, "y": y, "label": label, "width": max(xs) - x, "height": max(ys) - y,
                      "outliers": []})
    vertical = bool(boxes) and all(b["height"] == boxes[0]["height"] for b in boxes)
    if vertical:
        _swap_axes(c)
        for b in boxes:
            b["x"], b["y"] = b["y"], b["x"]
            b["width"], b["height"] = b["height"], b["width"]
    for line in ax.lines:
        xs = [_round(v) for v in line.get_xdata()]
        ys = [_round(v) for v in line.get_ydata()]
        if vertical:
            xs, ys = ys, xs
        if len(xs) == 1:
            box = next((b for b in boxes if b["x"] <= xs[0] <= b["x"] + b["width"]), None)
            if box is None:
                continue
            box["outliers"].append(ys[0])
        if len(ys) != 2:
            continue
        box = next((b for b in boxes if b["x"] <= xs[0] <= xs[1] <= b["x"] + b["width"]), None)
        if box is None:
            continue
        if ys[0] == ys[1] and box["y"] <= ys[0] <= box["y"] + box["height"]:
            box["median"] = ys[0]
            continue
        low, high = min(ys), max(ys)
        if high == box["y"]:
            box["whisker_lower"] = low
        elif low == box["y"] + box["height"]:
            box["whisker_upper"] = high
    for b in boxes:
        c["elements"].append({"label": b["label"], "min": b["whisker_lower"], "first_quartile": b["y"],
                              "median": b["median"], "third_quartile": b["y"] + b["height"],
                              "max": b["whisker_upper"], "outliers": b["outliers"]})


def _axes_chart(ax):
    kind = _chart_type(ax)
    c = {"type": kind, "title": _none_if_empty(ax.get_title()), "elements": []}
    build = {"line": _line_chart, "scatter": _scatter_chart, "bar": _bar_chart, "pie": _pie_chart,
             "box_and_whisker": _box_chart}.get(kind)
    if build is not None:
        build(ax, c)
    return c


def _suptitle(fig):
    get = getattr(fig, "get_suptitle", None)
    if get is not None:
        return get()
    t = getattr(fig, "_suptitle", None)
    return t.get_text() if t is not None else ""


def chart(fig):
    """The chart of a figure (a dict), or None when it has no axes with data."""
    axes = fig.get_axes()
    if not axes or not any(ax.has_data() for ax in axes):
        return None
    if len(axes) > 1:
        return {"type": "superchart", "title": _suptitle(fig), "elements": [_axes_chart(ax) for ax in axes]}
    return _axes_chart(axes[0])
