#!/bin/sh
# docker/compat-run.sh: the entrypoint of docker/compose.compat.yml's compat service.
# Runs each compat suite (the arguments; none: every suite, compat-tests/*/suite.py)
# against its own es, the service es-<suite> of that compose file:
#
#   compat-tests/run --quick --against es --bootstrap es-<suite>:9092 <suite>
#
# and copies each suite's summary and results (target/compat/summary.json,
# target/compat/es/<suite>/) to COMPAT_DOCKER_RESULTS (default /results, a volume in
# the compose file) as summary-<suite>.json and <suite>/. Exits 1 if any run failed (a
# test in a suite's tests.allow failed, or the suite could not run).
# COMPAT_ARGS adds arguments to every run (e.g. COMPAT_ARGS="--only test_a,test_b").
set -u
cd "$(dirname "$0")/.." || exit 1
results=${COMPAT_DOCKER_RESULTS:-/results}
mkdir -p "$results"
if [ "$#" -eq 0 ]; then
  for p in compat-tests/*/suite.py; do
    s=${p%/suite.py}
    set -- "$@" "${s#compat-tests/}"
  done
fi
status=0
failed=""
for s in "$@"; do
  # shellcheck disable=SC2086  # COMPAT_ARGS is a list of words
  if compat-tests/run --quick --against es --bootstrap "es-$s:9092" ${COMPAT_ARGS:-} "$s"; then
    :
  else
    status=1
    failed="$failed $s"
  fi
  if [ -f target/compat/summary.json ]; then
    cp target/compat/summary.json "$results/summary-$s.json"
  fi
  if [ -d "target/compat/es/$s" ]; then
    rm -rf "${results:?}/$s"
    cp -r "target/compat/es/$s" "$results/$s"
  fi
done
if [ "$status" -eq 0 ]; then
  echo "compat-run: every suite passed its tests.allow ($*)"
else
  echo "compat-run: failed:$failed"
fi
exit "$status"
