#!/usr/bin/env bash
# Installs what bench/bench_airflow_side_by_side.py compares Zonda with: Airflow 2.10.5 and Airflow
# 3.3.2 (the newest on PyPI when written), each in its own virtualenv, with Postgres from Debian. Not
# part of CI; run by hand before the bench:
#
#     bench/setup_airflow_side_by_side.sh     # venvs in ~/.cache/zonda/airflow-2.10.5 and airflow-3.3.2
#
# Airflow's constraints files live on GitHub, which this machine cannot reach, so for 2.10.5 the
# versions it pins for the database and web stack are written out here. With them pip installs what
# constraints-2.10.5/constraints-3.11.txt lists for these packages (checked: SQLAlchemy 1.4.54,
# Flask-SQLAlchemy 2.5.1, Flask 2.2.5, Werkzeug 2.2.3, connexion 2.14.2, marshmallow 3.26).
# Airflow 3.3.2 installs with pip's own resolution (its FastAPI/SQLAlchemy 2 stack needs no pins).
# Postgres comes from apt; the bench runs it itself, as the `postgres` user, in a temporary directory.
set -euo pipefail

PYTHON=${PYTHON:-python3.11}
AIRFLOW2_VENV=${AIRFLOW_VENV:-$HOME/.cache/zonda/airflow-2.10.5}
AIRFLOW3_VENV=${AIRFLOW3_VENV:-$HOME/.cache/zonda/airflow-3.3.2}

if ! command -v "$PYTHON" >/dev/null; then
    echo "need $PYTHON (Airflow 2.10.5 supports Python 3.8-3.12, 3.3.2 3.10-3.13)" >&2
    exit 1
fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    apt-get update -q && apt-get install -y -q postgresql
fi

if [ ! -x "$AIRFLOW2_VENV/bin/airflow" ]; then
    "$PYTHON" -m venv "$AIRFLOW2_VENV"
    "$AIRFLOW2_VENV/bin/pip" install -q --upgrade pip
    # sqlalchemy<2 and flask-sqlalchemy<3: Airflow 2.10 is written for SQLAlchemy 1.4; marshmallow<4:
    # flask-appbuilder 4.5 uses marshmallow 3's API; flask<2.3, werkzeug<3, connexion<3: the webserver
    # stack Airflow 2.10 was released with.
    "$AIRFLOW2_VENV/bin/pip" install -q \
        "apache-airflow[postgres]==2.10.5" \
        "sqlalchemy>=1.4.36,<2" "flask-sqlalchemy<3" "marshmallow<4" \
        "flask<2.3" "werkzeug<3" "connexion<3"
fi
if [ ! -x "$AIRFLOW3_VENV/bin/airflow" ]; then
    "$PYTHON" -m venv "$AIRFLOW3_VENV"
    "$AIRFLOW3_VENV/bin/pip" install -q --upgrade pip
    "$AIRFLOW3_VENV/bin/pip" install -q "apache-airflow[postgres]==3.3.2"
fi
"$AIRFLOW2_VENV/bin/airflow" version
"$AIRFLOW3_VENV/bin/airflow" version
echo "Airflow 2.10.5 in $AIRFLOW2_VENV, 3.3.2 in $AIRFLOW3_VENV; run: python bench/bench_airflow_side_by_side.py"
