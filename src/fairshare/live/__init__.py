"""The live scheduler: `fairshare serve`, its HTTP API, store, Ray executor, dashboard and metrics."""
