"""What one try needs in its pod or process: its invocation, its template context, its XComs.

`invocation_builder` (the `TaskInvocation` the runner gets, one builder for the controller, `dags test`
and the UI), `task_context` (Airflow's `get_template_context`), `templating` (Jinja as Airflow renders
operator arguments), `xcoms` (values, references to stored bytes), `secret_refs` (the variables and
connections a pod gets), `rendered_fields` (the UI's "Rendered Template").

May import: `zonda.specs`, `zonda.timetables`, `zonda.resources`, `zonda.variables`; a template's
`dagfile:` macro through `zonda.authoring.dag_files` (the one exception, in `.importlinter`).
"""
