#!/usr/bin/env bash
# CTest xlnet_two_host_test: xlnet-pretrain on two "hosts" with their own
# addresses, launched by torchrun's c10d rendezvous as on a cluster, against
# a one-rank run of the same config.
#
#   two_host_test.sh BUILD_DIR SOURCE_DIR
#
# The hosts are two network namespaces, xlnet-h0-PID and xlnet-h1-PID,
# joined by a veth pair with 10.213.N.1/24 and 10.213.N.2/24 (N from the
# PID; the addresses exist only inside the namespaces, so they cannot clash
# with this machine's). Each host also has its own hostname (a UTS
# namespace, named as its network namespace) and its own /etc/hosts (ip
# netns exec mounts /etc/netns/NAME/hosts there). On configs/tiny.yaml
# (model.dropout=0, 24 steps) with data/sample/ prepared by xlnet-data, both
# hosts run torchrun into one run directory (the shared filesystem of a
# cluster), twice:
# (a) "dns": each host's name is its 10.213 address on both hosts (what a
#     cluster's DNS answers); on each host
#       torchrun --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d \
#         --rdzv_endpoint 10.213.N.1:PORT --rdzv_id ID \
#         --redirects 1 --tee 1 --no_python xlnet-pretrain ...
#     torchrun's agent on host 0 serves the rendezvous (its name resolves to
#     the endpoint), MASTER_ADDR is host 0's name, and Gloo binds the
#     address the host's name resolves to (c10d's default).
# (b) "debian": each host's own name on 127.0.1.1 (the line Debian's
#     installer writes), the other's on its 10.213 address. c10d's default
#     would bind Gloo to 127.0.1.1, which the other host cannot reach, so
#     each host names its interface, and the endpoint is host 0's name
#     (torchrun's agent serves the rendezvous when the endpoint is its
#     hostname or an address its hostname resolves to):
#       GLOO_SOCKET_IFNAME=<its veth> torchrun ... \
#         --rdzv_endpoint <host 0's name>:PORT ...
# Then this machine runs the same config as one rank. For each two-host run
# it checks that rank R joined on host R, that each host's Gloo device has
# that host's own 10.213 address, that each host sent at least the model's
# size over its veth, and that the final weights equal the one-rank run's
# within 1e-6.
#
# Needs root (it creates namespaces), `ip netns` (iproute2), unshare
# (util-linux) and torchrun (python3-torch; XLNET_TORCHRUN overrides);
# without them it exits 77 (CTest: skipped) saying why, and with CI set it
# fails instead. XLNET_TWO_HOST_PORT sets the rendezvous port (inside the
# namespaces; default 46900), XLNET_TWO_HOST_TIMEOUT the seconds each run
# may take (default 90). The namespaces, the veth pair and
# /etc/netns/xlnet-h*-PID are always removed at exit; on a failure the logs
# are printed.
set -euo pipefail
BUILD_DIR=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
BIN="$BUILD_DIR/bin"
NAME=xlnet_two_host_test
# cannot_run, fail, compare_weights.
source "$SRC/tests/script_util.sh"
PORT=${XLNET_TWO_HOST_PORT:-46900}
RUN_TIMEOUT=${XLNET_TWO_HOST_TIMEOUT:-90}
STEPS=24


if [[ $(id -u) -ne 0 ]]; then
  cannot_run "needs root (it creates network namespaces and a veth pair);" \
    "run ctest as root"
fi
command -v ip >/dev/null ||
  cannot_run "no ip command (apt-get install iproute2; scripts/setup.sh)"
ip netns list >/dev/null 2>&1 ||
  cannot_run "ip netns is unavailable here: $(ip netns list 2>&1 | head -n 1)"
command -v unshare >/dev/null ||
  cannot_run "no unshare command (apt-get install util-linux)"
TORCHRUN=${XLNET_TORCHRUN:-$(command -v torchrun || true)}
[[ -n "$TORCHRUN" ]] ||
  cannot_run "no torchrun (apt-get install python3-torch; scripts/setup.sh;" \
    "or set XLNET_TORCHRUN)"
for tool in xlnet-data xlnet-pretrain; do
  [[ -x "$BIN/$tool" ]] || { echo "$NAME: $BIN/$tool is not built" >&2; exit 1; }
done

# Host i: namespace (and hostname) NS[i], veth VETH[i], address ADDR[i].
NET=10.213.$(($$ % 254 + 1))
NS=(xlnet-h0-$$ xlnet-h1-$$)
VETH=(xlv0-$$ xlv1-$$)
ADDR=("$NET.1" "$NET.2")

TMP=$(mktemp -d /tmp/xlnet_two_host_XXXXXX)
PIDS=()

cleanup() {
  local rc=$?
  set +e
  if ((rc != 0)); then print_tails 80 "$TMP"/*.log; fi
  # The torchruns still running (a failed wait): their whole process
  # groups (setsid below), agents and workers.
  local pid ns
  for pid in "${PIDS[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  # Deleting a namespace deletes the veth end in it, and with it the pair.
  for ns in "${NS[@]}"; do
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP


# The two hosts. Where namespaces or veth pairs cannot be made (a container
# without CAP_SYS_ADMIN, a kernel without veth), the test cannot run.
for i in 0 1; do
  error=$(ip netns add "${NS[i]}" 2>&1) ||
    cannot_run "cannot create a network namespace: ip netns add: $error"
  mkdir -p "/etc/netns/${NS[i]}"
done
error=$(ip link add "${VETH[0]}" netns "${NS[0]}" type veth \
  peer name "${VETH[1]}" netns "${NS[1]}" 2>&1) ||
  cannot_run "cannot create a veth pair: ip link add: $error"
for i in 0 1; do
  ip -n "${NS[i]}" link set lo up
  ip -n "${NS[i]}" addr add "${ADDR[i]}/24" dev "${VETH[i]}"
  ip -n "${NS[i]}" link set "${VETH[i]}" up
done

# Writes each host's /etc/hosts: its own name on its 10.213 address ($1 =
# dns) or on 127.0.1.1 ($1 = debian), the other host's on its 10.213
# address.
write_hosts() {
  local i own
  for i in 0 1; do
    own=${ADDR[i]}
    [[ "$1" == debian ]] && own=127.0.1.1
    printf '127.0.0.1 localhost\n%s %s\n%s %s\n' "$own" "${NS[i]}" \
      "${ADDR[1 - i]}" "${NS[1 - i]}" >"/etc/netns/${NS[i]}/hosts"
  done
}
# Runs "$@" on host $1: its namespace, its /etc/hosts, its hostname.
on_host() {
  local i=$1
  shift
  ip netns exec "${NS[i]}" unshare --uts \
    sh -c 'hostname "$0" && exec "$@"' "${NS[i]}" "$@"
}
# The bytes host $1 has sent over its veth.
veth_sent() {
  ip -n "${NS[$1]}" -s -j link show dev "${VETH[$1]}" |
    python3 -c "import json, sys; print(json.load(sys.stdin)[0]['stats64']['tx']['bytes'])"
}

CORPUS="$SRC/data/sample/brown_sample.txt"
"$BIN/xlnet-data" tokenizer --input "$CORPUS" --vocab_size 1000 \
  --out "$TMP/spiece.model" >"$TMP/data.log" 2>&1 || fail "xlnet-data tokenizer"
"$BIN/xlnet-data" prepare --input "$CORPUS" --tokenizer "$TMP/spiece.model" \
  --out "$TMP/data" >"$TMP/data.log" 2>&1 || fail "xlnet-data prepare"

# The arguments of every run but --out (launch_e2e_test.cc's PretrainArgs,
# and a timeout on the rendezvous and every collective).
ARGS=(--config "$SRC/configs/tiny.yaml" --data "$TMP/data"
  --set train.threads=1 --set train.eval_steps=0 --set model.dropout=0
  --set train.max_steps=$STEPS --set train.save_steps=4
  --set train.log_steps=1 --set train.keep_checkpoints=0
  --set train.dist_timeout_s=60 --set train.startup_timeout_s=60
  --resume latest)

# Runs torchrun on both hosts into $TMP/$1 ($1: dns or debian, as in
# write_hosts) and checks the run.
two_hosts() {
  local mode=$1 i code sent start model_bytes final
  local endpoint="${ADDR[0]}:$PORT"
  local -a codes=() sent_before=() ifname=("" "")
  write_hosts "$mode"
  on_host 1 getent hosts "${NS[0]}" | grep -q "^${ADDR[0]} " ||
    fail "($mode) host 1 does not resolve ${NS[0]} to ${ADDR[0]}"
  if [[ "$mode" == debian ]]; then
    endpoint="${NS[0]}:$PORT"
    ifname=("${VETH[@]}")
  fi
  for i in 0 1; do sent_before+=("$(veth_sent "$i")"); done
  start=$SECONDS
  for i in 0 1; do
    # Each in its own process group (setsid, which does not fork here),
    # which cleanup ends: agent and worker. An empty GLOO_SOCKET_IFNAME is
    # unset for xlnet-pretrain.
    setsid ip netns exec "${NS[i]}" unshare --uts \
      sh -c 'hostname "$0" && exec "$@"' "${NS[i]}" \
      env XLNET_LOG_LEVEL=info GLOO_SOCKET_IFNAME="${ifname[i]}" \
      timeout -k 5 "$RUN_TIMEOUT" \
      "$TORCHRUN" --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d \
      --rdzv_endpoint "$endpoint" --rdzv_id "xlnet-two-host-$mode-$$" \
      --redirects 1 --tee 1 --log_dir "$TMP/torchrun_logs_${mode}_$i" \
      --no_python "$BIN/xlnet-pretrain" "${ARGS[@]}" --out "$TMP/$mode" \
      >"$TMP/$mode.host$i.log" 2>&1 &
    PIDS+=($!)
  done
  for i in 0 1; do
    code=0
    wait "${PIDS[i]}" || code=$?
    codes+=("$code")
  done
  PIDS=()
  echo "$NAME: ($mode) torchrun exit codes ${codes[*]} after $((SECONDS - start))s"
  for i in 0 1; do
    ((codes[i] == 0)) || fail "($mode) torchrun on host $i exited" \
      "${codes[i]} (124 or 137: still running after ${RUN_TIMEOUT}s)"
  done
  # Rank i on host i (c10d ranks the agents in the order of their
  # hostnames), and each host's Gloo device on its own address.
  for i in 0 1; do
    grep -q "rank $i of 2 joined (gloo on cpu, launched by torchrun)" \
      "$TMP/$mode.host$i.log" ||
      fail "($mode) host $i: no 'rank $i of 2 joined' line"
    grep -q "gloo device: .*addr=\[${ADDR[i]}\]" "$TMP/$mode.host$i.log" ||
      fail "($mode) host $i: no 'gloo device: ... addr=[${ADDR[i]}]' line"
    grep "gloo device:" "$TMP/$mode.host$i.log" |
      sed "s/^/$NAME: ($mode) host $i: /"
  done
  final="$TMP/$mode/checkpoints/step_$STEPS/model.safetensors"
  [[ -f "$final" ]] || fail "($mode) no checkpoints/step_$STEPS/model.safetensors"
  # Every step all-reduces every gradient, so each host sent at least the
  # model's size.
  model_bytes=$(stat -c %s "$final")
  for i in 0 1; do
    sent=$(($(veth_sent "$i") - sent_before[i]))
    echo "$NAME: ($mode) host $i sent $sent bytes over ${VETH[i]}" \
      "(model.safetensors: $model_bytes)"
    ((sent >= model_bytes)) || fail "($mode) host $i sent $sent bytes over" \
      "its veth, less than the model's $model_bytes"
  done
}

two_hosts dns
two_hosts debian

# The reference: the same config as one rank on this machine.
start=$SECONDS
timeout -k 5 "$RUN_TIMEOUT" "$BIN/xlnet-pretrain" "${ARGS[@]}" \
  --out "$TMP/one_rank" >"$TMP/one_rank.log" 2>&1 || fail "the one-rank run"
echo "$NAME: one rank: $((SECONDS - start))s"

# The weights: every float32 tensor of each two-host run within 1e-6 of
# the one-rank run's (the safetensors layout read with the standard library
# alone).
final="checkpoints/step_$STEPS/model.safetensors"
compare_weights 1e-6 "$TMP/one_rank/$final" "$TMP/dns/$final" \
  "$TMP/debian/$final" ||
  fail "two-host weights differ from the one-rank run's by more than 1e-6"
echo "$NAME: PASSED"
