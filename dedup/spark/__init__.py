"""Corpus deduplication as a Spark job: the one-machine rule, across executors.

``job`` holds the job (``run``, called by the command and by the script
``job.py`` that ``spark-submit`` runs); see docs/spark.md. Importing this
package does not import pyspark: only running the job does.
"""
