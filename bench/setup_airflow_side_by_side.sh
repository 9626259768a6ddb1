#!/usr/bin/env bash
# Installs what bench/bench_airflow_side_by_side.py compares Zonda with: Airflow 2.10.5 in its own
# virtualenv, with Postgres from Debian. Not part of CI; run by hand before the bench:
#
#     bench/setup_airflow_side_by_side.sh            # venv in ~/.cache/zonda/airflow-2.10.5
#
# Airflow's constraints file lives on GitHub, which this machine cannot reach, so the versions it
# pins for the database and web stack are written out here. With them pip installs what
# constraints-2.10.5/constraints-3.11.txt lists for these packages (checked: SQLAlchemy 1.4.54,
# Flask-SQLAlchemy 2.5.1, Flask 2.2.5, Werkzeug 2.2.3, connexion 2.14.2, marshmallow 3.26).
# Postgres comes from apt; the bench runs it itself, as the `postgres` user, in a temporary directory.
set -euo pipefail

AIRFLOW_VERSION=2.10.5
PYTHON=${PYTHON:-python3.11}
VENV=${AIRFLOW_VENV:-$HOME/.cache/zonda/airflow-$AIRFLOW_VERSION}

if ! command -v "$PYTHON" >/dev/null; then
    echo "need $PYTHON (Airflow $AIRFLOW_VERSION supports Python 3.8-3.12)" >&2
    exit 1
fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    apt-get update -q && apt-get install -y -q postgresql
fi

if [ ! -x "$VENV/bin/airflow" ]; then
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
    # sqlalchemy<2 and flask-sqlalchemy<3: Airflow 2.10 is written for SQLAlchemy 1.4; marshmallow<4:
    # flask-appbuilder 4.5 uses marshmallow 3's API; flask<2.3, werkzeug<3, connexion<3: the webserver
    # stack Airflow 2.10 was released with.
    "$VENV/bin/pip" install -q \
        "apache-airflow[postgres]==$AIRFLOW_VERSION" \
        "sqlalchemy>=1.4.36,<2" "flask-sqlalchemy<3" "marshmallow<4" \
        "flask<2.3" "werkzeug<3" "connexion<3"
fi
"$VENV/bin/airflow" version
echo "Airflow $AIRFLOW_VERSION is in $VENV; run: python bench/bench_airflow_side_by_side.py"
