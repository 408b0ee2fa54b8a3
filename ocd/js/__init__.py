"""JavaScript and TypeScript Workers, run in workerd (npm ``workerd``), with ocd as their
queue backend: bundling (``bundle``), the toolchain (``toolchain``), the generated workerd
config (``capnp``), the workerd process (``process``), the producer protocol endpoint
(``producer``) and the consumer kind that calls ``queue()`` through the bridge Worker
(``invoke``)."""
