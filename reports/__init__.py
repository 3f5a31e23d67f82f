"""PySpark evidence pipeline and report site (issue 6 builds it; nothing here yet)."""
