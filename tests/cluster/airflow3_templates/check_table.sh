# a template file: rendered, then run by bash
test "{{ params.table }}" = events || exit 3
echo "table {{ params.table }} in {{ run_id }}"
