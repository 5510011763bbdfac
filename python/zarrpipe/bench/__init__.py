"""zarrpipe's throughput benchmark: datasets, adapters, a process-per-row runner and reports."""
