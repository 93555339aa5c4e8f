"""Every public name of the package has a docstring (make pydoc makes the API reference of them):
the functions and classes of fedvm.__all__ and of each public module's __all__, and the public
methods and properties of those classes."""

import importlib
import inspect
import os
import pydoc
import re

import conftest
import fedvm as fv

MODULES = [importlib.import_module("fedvm" + m) for m in ("", ".algorithms", ".data", ".lax", ".ops", ".program",
                                                          ".tracer", ".train", ".types")]


def undocumented():
    missing = []
    for mod in MODULES:
        if not (mod.__doc__ or "").strip():
            missing.append(mod.__name__)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            if not (obj.__doc__ or "").strip():
                missing.append("%s.%s" % (mod.__name__, name))
            if inspect.isclass(obj) and obj.__module__.startswith("fedvm"):
                for k, v in vars(obj).items():
                    if k.startswith("_") or not (inspect.isfunction(v) or isinstance(v, (property, classmethod))):
                        continue
                    f = v.__func__ if isinstance(v, classmethod) else v
                    if not (f.__doc__ or "").strip():
                        missing.append("%s.%s.%s" % (mod.__name__, name, k))
    return sorted(set(missing))


def test_every_public_name_has_a_docstring():
    assert undocumented() == []


def test_the_check_sees_a_missing_one():
    def nodoc():
        pass

    fv.__all__.append("_nodoc_for_the_test")
    fv._nodoc_for_the_test = nodoc
    try:
        assert undocumented() == ["fedvm._nodoc_for_the_test"]
    finally:
        fv.__all__.remove("_nodoc_for_the_test")
        del fv._nodoc_for_the_test


def test_make_pydoc_documents_every_public_module():
    mk = open(os.path.join(conftest.ROOT, "Makefile")).read()
    listed = re.search(r"^PYDOC_MODULES := (.*?)\n(?!\s)", mk, re.S | re.M).group(1).replace("\\\n", " ").split()
    public = {m.__name__ for m in MODULES} | {"fedvm.algorithms.scaffold", "fedvm.algorithms.synthetic"}
    assert set(listed) == public
    for name in listed:  # what pydoc -w writes, without the files
        obj = importlib.import_module(name)
        page = pydoc.html.page(pydoc.describe(obj), pydoc.html.document(obj, name))
        assert name in page and len(page) > 1000
