"""Adapters: the only code that knows Kubernetes' file and API shapes."""
