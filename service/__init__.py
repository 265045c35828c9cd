"""The engine service: what computes, caches and schedules the app's results, between ``core/`` (the engine) and
``ui/`` (widgets, page layout and the session glue). It imports no Streamlit, so a Dask worker, the warm-up and the
benchmarks run it without a web front end.

- ``service.views``: the frozen settings of every cached computation (its cache key and job key come from them).
- ``service.compute``: the engine calls behind the views (inputs, exact attention, method results) and the display
  reductions (``service.downsampling``).
- ``service.result_cache``: one memory layer per process over the shared disk or Redis store.
- ``service.scheduler``: admission, the fair queue, progress, cancel and the time limit of heavy jobs.
- ``service.dask_client``: the client of a Dask cluster that runs heavy jobs on its workers.
- ``service.uploads``, ``service.prefetch``: uploaded q, k, v and work done ahead for Compare.
- ``service.fields``: the shared settings' fields and the pages' defaults, plain data (``ui.fields`` and
  ``ui.presets`` re-export them), so bare-host tools such as the GPU check read them without Streamlit.

Where the service needs the front end (whether a session is still connected, how a page waits for a job, the page
run's cancel token), the front end installs a hook at startup: ``service.scheduler.install`` (``ui.jobs`` calls it)
and ``core.cancel.set_fallback``.
"""
