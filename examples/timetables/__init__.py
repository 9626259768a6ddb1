"""Custom timetables, ported from Airflow by changing only their imports."""
