"""Domain models: snapshot objects, RepackRun spec and status, plans."""
