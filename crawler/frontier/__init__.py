"""The durable frontier: a crawl's queue and seen set in SQLite under ``JOBDIR``,
acknowledged only once what each request produced is committed (see ``acks``)."""
