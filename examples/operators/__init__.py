"""Python code the example DAGs run: callables for PythonOperator and friends, and custom operators."""
