#!/bin/sh
# docker/entrypoint.sh: the es image's entrypoint. It turns environment
# variables into es-broker flags and then becomes es-broker (exec, so the
# broker is PID 1 of the container and gets its SIGTERM directly):
#
#   exec es-broker <flags from the environment> "$@"
#
# The flags come first, so a flag given as an argument (`docker run IMAGE
# --log-level debug`, a compose `command:`) wins: es-broker lets a later
# occurrence of a flag override an earlier one. The variables, and the flag
# each becomes (docs/operations.md, "Containers"):
#
#   ES_DATA_DIR                        --data-dir                 (default /var/lib/es, the image's volume)
#   ES_LISTEN                          --listen HOST:PORT         (one PLAINTEXT listener)
#   ES_LISTENERS=A://h:p,B://h:p       --listener A://h:p --listener B://h:p
#   ES_ADVERTISED_LISTENERS=A://h:p,.. --advertised-listener ...  (one per element)
#   ES_LISTENER_SECURITY_PROTOCOL_MAP  --listener-security-protocol-map
#   ES_NODE_ID                         --node-id
#   ES_CONTROLLER_QUORUM_VOTERS        --controller-quorum-voters
#   ES_CONTROLLER_LISTEN               --controller-listen
#   ES_ADMIN_LISTEN                    --admin-listen             (default 0.0.0.0:9644; `none` turns it off)
#   ES_SCHEMA_REGISTRY_LISTEN          --schema-registry-listen   (default 0.0.0.0:8081; `none` turns it off)
#   ES_LOG_LEVEL                       --log-level
#   ES_LOG_FORMAT                      --log-format
#   ES_SET_<NAME>=V, KAFKA_CFG_<NAME>=V  --set <name>=V          (one per variable, sorted by variable name)
#
# <NAME> becomes a Kafka setting name as Confluent's and Bitnami's Kafka
# images do it: lower case, `_` -> `.`, `__` -> `_`, `___` -> `-`. So
# ES_SET_LOG_RETENTION_MS=3600000 is `--set log.retention.ms=3600000` and
# KAFKA_CFG_LISTENER_NAME_SASL__SSL_SASL_ENABLED_MECHANISMS=PLAIN is
# `--set listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN`.
#
# Without ES_LISTEN, ES_LISTENERS, a `listeners` setting (ES_SET_LISTENERS,
# KAFKA_CFG_LISTENERS, a --config file naming it) or --listen/--listener
# among the arguments, the broker listens on 0.0.0.0:9092 (es-broker's own
# default, 127.0.0.1:9092, cannot be reached from outside a container). An
# empty variable counts as unset.
#
# The first argument may also be a command: an es-broker subcommand
# (`keys`, `mirror`, `quorum`, `dump-log`, `help`: run with the arguments as
# given, no flags added) or any other program (`sh`), run as it is.
#
# ES_BROKER_BIN names the binary (default: es-broker on PATH), so that
# scripts/docker-check runs this script outside a container, against the
# real binary and against a stub that prints its arguments.
set -eu

bin=${ES_BROKER_BIN:-es-broker}

die() {
  echo "entrypoint: $*" >&2
  exit 64
}

# `es-broker ...` as the command is the broker with those arguments.
if [ "$#" -gt 0 ] && [ "$1" = es-broker ]; then
  shift
fi
if [ "$#" -gt 0 ]; then
  case $1 in
    -*) ;; # flags for the broker: handled below
    keys | mirror | quorum | dump-log | help) exec "$bin" "$@" ;;
    *) exec "$@" ;;
  esac
fi

# The arguments given, to be moved behind the flags added below.
given=$#

# What the arguments already say about listeners (--listen, --listener, a
# --config file with `listeners`).
args_listen=no
want_config=no
for a in "$@"; do
  if [ "$want_config" = yes ]; then
    want_config=no
    if [ -r "$a" ] && grep -Eq '^[[:space:]]*listeners[[:space:]]*[=:]' "$a"; then
      args_listen=yes
    fi
    continue
  fi
  case $a in
    --listen | --listen=* | --listener | --listener=*) args_listen=yes ;;
    --config) want_config=yes ;;
    --config=*)
      f=${a#--config=}
      if [ -r "$f" ] && grep -Eq '^[[:space:]]*listeners[[:space:]]*[=:]' "$f"; then
        args_listen=yes
      fi
      ;;
  esac
done

listen=${ES_LISTEN:-}
listeners=${ES_LISTENERS:-}
if [ -n "$listen" ] && [ -n "$listeners" ]; then
  die "set ES_LISTEN (one PLAINTEXT listener) or ES_LISTENERS, not both"
fi
if [ -z "$listen" ] && [ -z "$listeners" ] && [ "$args_listen" = no ] \
  && [ -z "${ES_SET_LISTENERS:-}" ] && [ -z "${KAFKA_CFG_LISTENERS:-}" ]; then
  listen=0.0.0.0:9092
fi

set -- "$@" --data-dir "${ES_DATA_DIR:-/var/lib/es}"
if [ -n "$listen" ]; then
  set -- "$@" --listen "$listen"
fi

# Comma-separated lists: one flag per element.
for spec in "--listener:$listeners" "--advertised-listener:${ES_ADVERTISED_LISTENERS:-}"; do
  name=${spec%%:*}
  rest=${spec#*:},
  while [ -n "$rest" ]; do
    item=${rest%%,*}
    rest=${rest#*,}
    if [ -n "$item" ]; then
      set -- "$@" "$name" "$item"
    fi
  done
done

# One flag each, when the variable is set and not empty.
for spec in \
  "--listener-security-protocol-map:${ES_LISTENER_SECURITY_PROTOCOL_MAP:-}" \
  "--node-id:${ES_NODE_ID:-}" \
  "--controller-quorum-voters:${ES_CONTROLLER_QUORUM_VOTERS:-}" \
  "--controller-listen:${ES_CONTROLLER_LISTEN:-}" \
  "--admin-listen:${ES_ADMIN_LISTEN:-0.0.0.0:9644}" \
  "--schema-registry-listen:${ES_SCHEMA_REGISTRY_LISTEN:-0.0.0.0:8081}" \
  "--log-level:${ES_LOG_LEVEL:-}" \
  "--log-format:${ES_LOG_FORMAT:-}"; do
  name=${spec%%:*}
  value=${spec#*:}
  if [ -n "$value" ]; then
    set -- "$@" "$name" "$value"
  fi
done

# ES_SET_<NAME> and KAFKA_CFG_<NAME>: --set name=value. Only the names are
# read from `env` (values may hold newlines); each is checked to be a set
# variable before its value is read.
for var in $(env | sed -n 's/^\(ES_SET_[A-Za-z0-9_]*\)=.*/\1/p; s/^\(KAFKA_CFG_[A-Za-z0-9_]*\)=.*/\1/p' | LC_ALL=C sort -u); do
  isset=""
  eval "isset=\${$var+yes}"
  [ "$isset" = yes ] || continue
  eval "value=\$$var"
  key=${var#ES_SET_}
  key=${key#KAFKA_CFG_}
  key=$(printf '%s' "$key" | sed 's/___/-/g; s/__/%/g; s/_/./g; s/%/_/g' | tr '[:upper:]' '[:lower:]')
  [ -n "$key" ] || die "$var names no setting"
  set -- "$@" --set "$key=$value"
done

# Move the arguments given behind the flags added: they come last and win.
i=0
while [ "$i" -lt "$given" ]; do
  set -- "$@" "$1"
  shift
  i=$((i + 1))
done

exec "$bin" "$@"
