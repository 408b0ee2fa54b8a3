"""Top-level modules that Python Workers code imports besides ``workers``: ``pyodide``,
``js`` and ``asgi``. ocd's loader appends this directory to the end of ``sys.path``, so a
real installed package of the same name is always found first."""
