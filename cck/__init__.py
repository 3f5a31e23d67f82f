"""The Core Conformance Kit under one import namespace: ``cck.codec`` (the core-protocol codec),
``cck.reference`` (the reference broker and client), ``cck.conformance`` (the conformance suite, its pytest plugin
and targets) and ``cck.reports`` (the PySpark report pipeline); ``cck`` is also the command (``cck --help``).

In a source checkout the four are the folders at the top of the repository, reached through the relative symlinks
in this folder (``cck/codec -> ../codec``, ...; ``cck/fixtures -> ../fixtures`` is the data a run reads: the
broker.xml template, the Artemis pins, the Java sources); a wheel holds them as files.  Always import them as
``cck.<package>``: the bare names would load a second copy of every class.

(PYTEST_DONT_REWRITE: pytest marks the installed distribution's top package, ``cck``, for assertion rewriting when
it loads the plugin ``cck.conformance.plugin``; the ``cck`` command has imported this module by then, and it holds
no assertions.  The suite's modules are rewritten as ever.)
"""

__all__: list[str] = []
