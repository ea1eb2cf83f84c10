#!/usr/bin/env bash
# CTest xlnet_slurm_test: scripts/slurm/pretrain.sbatch under a real SLURM, a
# one-node cluster on this host (Debian 12's slurmctld, slurmd and munge,
# SLURM 22.05) that the test starts and stops.
#
#   slurm_test.sh BUILD_DIR SOURCE_DIR
#
# It writes a slurm.conf for this host (one node with its CPU count, no
# cgroups: proctrack/linuxproc, task/none; select/cons_tres; fixed ports
# P=XLNET_SLURM_PORT (default 46817) for slurmctld, P+1 for slurmd and
# P+2..P+5 for the runs' rendezvous; state, spool, logs and the munge key
# and socket in a temporary directory), starts munged,
# slurmctld and slurmd, and on configs/tiny.yaml (model.dropout=0) with
# data/sample/ prepared by xlnet-data:
# 0. srun -N1 -n2 xlnet-pretrain, 100 steps: both ranks join through srun's
#    variables; its speed sets the steps of the runs below (about 40 s of
#    training, so that the time-limit signal of (b) lands mid-run);
# (a) sbatch pretrain.sbatch (CPU, 1 node, 2 tasks), uninterrupted: the job
#     ends COMPLETED, never requeued, with the final checkpoint and a
#     "rank R of 2 joined (... launched by slurm)" line per rank;
# (b) the same with --time=2 --signal=B:TERM@80: SLURM's time-limit SIGTERM
#     reaches the batch shell mid-run, the tasks save and exit 0, the job
#     requeues itself and resumes (--resume latest) until it completes; its
#     final model.safetensors must equal (a)'s bit for bit;
# (c) the same, cancelled (scancel) once training has begun: the job ends
#     CANCELLED and does not requeue itself.
# slurmctld tests time limits every 30 s and sends the signal at the first
# test with at most warn+30 s left (here: at least 10 s into an attempt);
# (b) is submitted 20 s before a test (their times are in slurmctld's
# debug2 log), so its first attempt is stopped about 20 s in; a later
# attempt may be stopped again. A requeued job waits cred_expire (5 s here)
# before it may start again.
#
# Needs root (slurmd starts the jobs; munged and the daemons run as root
# here) and the packages slurmctld slurmd slurm-client munge:
#   apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge
# Without them it exits 77 (CTest: skipped) saying why; with CI set it
# installs missing packages (as root) and fails instead of skipping.
# The daemons are always stopped and the directory removed at exit; on a
# failure the job outputs and the daemons' logs are printed.
set -euo pipefail
BUILD_DIR=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
BIN="$BUILD_DIR/bin"
SBATCH_SCRIPT="$SRC/scripts/slurm/pretrain.sbatch"
PORT=${XLNET_SLURM_PORT:-46817}
NAME=xlnet_slurm_test
# cannot_run, fail, compare_weights.
source "$SRC/tests/script_util.sh"


PACKAGES=(slurmctld slurmd slurm-client munge)
if [[ $(id -u) -ne 0 ]]; then
  cannot_run "needs root (it starts munged, slurmctld and slurmd, which" \
    "run the jobs); run ctest as root"
fi
# The commands this test runs, and the Debian package of each.
declare -A PACKAGE_OF=([munged]=munge [mungekey]=munge [slurmctld]=slurmctld
  [slurmd]=slurmd [sbatch]=slurm-client [srun]=slurm-client
  [scontrol]=slurm-client [scancel]=slurm-client [squeue]=slurm-client
  [sinfo]=slurm-client)
# Sets `missing` to the packages of the commands not on PATH.
find_missing() {
  local cmd
  missing=()
  for cmd in "${!PACKAGE_OF[@]}"; do
    command -v "$cmd" >/dev/null || missing+=("${PACKAGE_OF[$cmd]}")
  done
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u | grep .)
}
find_missing
if ((${#missing[@]} > 0)); then
  if [[ -z "${CI:-}" ]]; then
    cannot_run "missing Debian packages: ${missing[*]}; install them with" \
      "apt-get install -y --no-install-recommends ${PACKAGES[*]}"
  fi
  echo "$NAME: installing ${missing[*]}"
  apt-get update -qq
  # policy-rc.d or not, the packaged services are not needed: this test
  # starts its own daemons with its own config.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null
  find_missing
  if ((${#missing[@]} > 0)); then
    echo "$NAME: FAILED: still missing after apt-get install:" \
      "${missing[*]} (commands not on PATH=$PATH)" >&2
    exit 1
  fi
fi
if (($(nproc) < 2)); then
  cannot_run "needs 2 CPUs (a job of 2 tasks); this machine has $(nproc)"
fi
for tool in xlnet-data xlnet-pretrain; do
  [[ -x "$BIN/$tool" ]] || { echo "$NAME: $BIN/$tool is not built" >&2; exit 1; }
done
for port in $(seq "$PORT" $((PORT + 5))); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "$NAME: port $port is in use; set XLNET_SLURM_PORT=P with P..P+5" \
      "free" >&2
    exit 1
  fi
done

# The directory of the munge socket must be searchable by all (munged
# checks), hence 755.
TMP=$(mktemp -d /tmp/xlnet_slurm_XXXXXX)
chmod 755 "$TMP"
mkdir "$TMP/state" "$TMP/spool" "$TMP/jobs"
export SLURM_CONF="$TMP/slurm.conf"
PIDS=()

cleanup() {
  local rc=$?
  set +e
  if ((rc != 0)); then print_tails 60 "$TMP"/jobs/*.out "$TMP"/*.log "$TMP"/*.stderr; fi
  # Cancel what is still queued or running, wait for the job processes to
  # end (slurmd kills them), then stop the daemons by their process ids.
  if [[ -n "${SLURMCTLD_STARTED:-}" ]]; then
    scancel --user=root >/dev/null 2>&1
    for _ in $(seq 30); do
      [[ -z "$(squeue -h -o %i 2>/dev/null)" ]] && break
      sleep 1
    done
  fi
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill "${PIDS[i]}" 2>/dev/null
  done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP


# munge: its own key and socket; SLURM finds the socket through AuthInfo.
mungekey -c -k "$TMP/munge.key"
chmod 400 "$TMP/munge.key"
# Each daemon in its own session (setsid): a signal to this script's
# process group (Ctrl-C, timeout) must leave them up until cleanup has
# cancelled the jobs through them.
setsid munged --foreground --socket="$TMP/munge.sock" --key-file="$TMP/munge.key" \
  --pid-file="$TMP/munged.pid" --log-file="$TMP/munged.log" \
  --seed-file="$TMP/munged.seed" >"$TMP/munged.stderr" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do [[ -S "$TMP/munge.sock" ]] && break; sleep 0.1; done
[[ -S "$TMP/munge.sock" ]] || fail "munged did not start"

NODE=$(hostname -s)
CPUS=$(nproc)
cat >"$SLURM_CONF" <<EOF
# One node on localhost for xlnet_slurm_test (tests/slurm/slurm_test.sh).
ClusterName=xlnettest
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: how long a requeued job waits before it may start again
# (default 120 s).
AuthInfo=socket=$TMP/munge.sock,cred_expire=5
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/slurmctld.log
SlurmdLogFile=$TMP/slurmd.log
# debug2: the log has a line per time-limit check (the test times (b) by
# them).
SlurmctldDebug=debug2
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
KillWait=5
# Scheduling passes every 2 s, so a requeued job starts soon after it may.
SchedulerParameters=sched_interval=2,bf_interval=2
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

# In the foreground (-D) so that their process ids are ours to stop.
# Their stderr repeats the log file, but also holds what they say before
# they open it.
setsid slurmctld -D -c -f "$SLURM_CONF" >"$TMP/slurmctld.stderr" 2>&1 &
PIDS+=($!)
SLURMCTLD_STARTED=1
setsid slurmd -D -f "$SLURM_CONF" >"$TMP/slurmd.stderr" 2>&1 &
PIDS+=($!)
for _ in $(seq 60); do
  if sinfo -h -N -o %t 2>/dev/null | grep -qx idle; then break; fi
  sleep 0.5
done
sinfo -h -N -o %t 2>/dev/null | grep -qx idle ||
  fail "the node did not come up idle: $(sinfo -N 2>&1)"

# The node list's first host is the rendezvous host: it must resolve.
if ! getent hosts "$NODE" >/dev/null; then
  echo "$NAME: $NODE does not resolve; MASTER_ADDR=127.0.0.1"
  export MASTER_ADDR=127.0.0.1
fi

CORPUS="$SRC/data/sample/brown_sample.txt"
"$BIN/xlnet-data" tokenizer --input "$CORPUS" --vocab_size 1000 \
  --out "$TMP/spiece.model" >"$TMP/data.log" 2>&1 || { cat "$TMP/data.log"; fail "xlnet-data tokenizer"; }
"$BIN/xlnet-data" prepare --input "$CORPUS" --tokenizer "$TMP/spiece.model" \
  --out "$TMP/data" >"$TMP/data.log" 2>&1 || { cat "$TMP/data.log"; fail "xlnet-data prepare"; }

SETS="model.dropout=0 train.eval_steps=0 train.log_steps=50 train.save_steps=100"

# 0. srun by hand: two ranks, and the speed of this machine now.
MASTER_PORT=$((PORT + 2)) timeout 90 srun -N1 -n2 --cpus-per-task=1 \
  "$BIN/xlnet-pretrain" --config "$SRC/configs/tiny.yaml" --data "$TMP/data" \
  --out "$TMP/calibrate" --set train.threads=1 --set train.max_steps=100 \
  $(printf -- '--set %s ' $SETS) >"$TMP/jobs/srun.out" 2>&1 ||
  fail "srun xlnet-pretrain failed"
for r in 0 1; do
  grep -q "rank $r of 2 joined (.* launched by slurm)" "$TMP/jobs/srun.out" ||
    fail "srun: no 'rank $r of 2 joined (... launched by slurm)' line"
done
seconds=$(sed -n 's/.*run finished at step 100: .* in \([0-9.]*\)s (.*/\1/p' \
  "$TMP/jobs/srun.out")
[[ -n "$seconds" ]] || fail "srun: no 'run finished at step 100' line"
STEPS=$(awk -v s="$seconds" 'BEGIN { n = int(100 * 40 / s); if (n < 300) n = 300; if (n > 20000) n = 20000; print n }')
echo "$NAME: srun: 100 steps of 2 ranks in ${seconds}s; the runs take $STEPS steps"
SETS="$SETS train.max_steps=$STEPS"

# The state of job $1 as "STATE RESTARTS".
job_state() {
  scontrol show job "$1" -o 2>/dev/null |
    sed -n 's/.*JobState=\([A-Z_]*\) .*Restarts=\([0-9]*\) .*/\1 \2/p'
}
# Waits up to $2 s for job $1 to end; prints its final "STATE RESTARTS".
wait_job() {
  local id=$1 deadline=$((SECONDS + $2)) state
  while ((SECONDS < deadline)); do
    state=$(job_state "$id")
    case "${state%% *}" in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | \
        BOOT_FAIL | DEADLINE | PREEMPTED)
        echo "$state"
        return 0
        ;;
    esac
    sleep 1
  done
  echo "TIMED_OUT $(job_state "$id")"
}
# Submits the sample job: $1 the run name, $2 the master port, then sbatch
# options. The CPU settings are environment variables; the command line
# overrides the script's GPU-cluster #SBATCH lines.
submit() {
  local run=$1 port=$2
  shift 2
  XLNET_DIR="$SRC" XLNET_BIN="$BIN" XLNET_DEVICE=cpu \
    XLNET_CONFIG="$SRC/configs/tiny.yaml" XLNET_DATA="$TMP/data" \
    XLNET_RUN="$TMP/$run" XLNET_SET="$SETS" MASTER_PORT=$port \
    sbatch --parsable --job-name="$run" --output="$TMP/jobs/$run.out" \
    --nodes=1 --ntasks-per-node=2 --gpus-per-node=0 --cpus-per-task=1 \
    "$@" "$SBATCH_SCRIPT"
}

# (a) uninterrupted.
start=$SECONDS
id_a=$(submit a $((PORT + 3)) --time=10)
result=$(wait_job "$id_a" 240)
echo "$NAME: (a) job $id_a: $result after $((SECONDS - start))s"
[[ "$result" == "COMPLETED 0" ]] || fail "(a) ended '$result', not 'COMPLETED 0'"
[[ -f "$TMP/a/checkpoints/step_$STEPS/model.safetensors" ]] ||
  fail "(a): no checkpoints/step_$STEPS/model.safetensors"
for r in 0 1; do
  grep -q "rank $r of 2 joined (.* launched by slurm)" "$TMP/jobs/a.out" ||
    fail "(a): no 'rank $r of 2 joined (... launched by slurm)' line"
done
grep -q "requeueing" "$TMP/jobs/a.out" && fail "(a) requeued itself"

# (b) stopped by the time-limit signal, requeued until done. slurmctld
# tests time limits every 30 s and signals at the first test with at most
# --signal's 80 s + 30 s left of the 120 s, i.e. at least 10 s into the
# attempt: submitted 20 s before the next test (from the log's last one),
# the first attempt gets its SIGTERM about 20 s in, mid-run.
last_test=$(sed -n 's/^\[\([0-9T:.-]*\)\] debug2: Testing job time limits.*/\1/p' \
  "$TMP/slurmctld.log" | tail -n 1)
if [[ -n "$last_test" ]]; then
  wait_s=$(awk -v last="$(date -d "$last_test" +%s.%N)" -v now="$(date +%s.%N)" \
    'BEGIN { t = last; while (t - 20 < now) t += 30; printf "%.1f", t - 20 - now }')
  sleep "$wait_s"
fi
start=$SECONDS
id_b=$(submit b $((PORT + 4)) --time=2 --signal=B:TERM@80)
result=$(wait_job "$id_b" 360)
echo "$NAME: (b) job $id_b: $result after $((SECONDS - start))s"
[[ "$result" == COMPLETED* ]] || fail "(b) ended '$result', not COMPLETED"
restarts=${result#* }
((restarts >= 1)) || fail "(b) was never requeued (the signal came after the run ended?)"
stops=$(grep -c "stop requested: saving at step" "$TMP/jobs/b.out" || true)
((stops >= 1)) || fail "(b): no 'stop requested: saving at step' line"
starts=$(grep -c "pretrain.sbatch: job $id_b start" "$TMP/jobs/b.out" || true)
((starts == restarts + 1)) ||
  fail "(b): $starts starts in its output for $restarts requeues"
grep "pretrain.sbatch: SIGTERM\|stop requested\|resum" "$TMP/jobs/b.out" | sed "s/^/$NAME: (b) /"
[[ -f "$TMP/b/checkpoints/step_$STEPS/model.safetensors" ]] ||
  fail "(b): no checkpoints/step_$STEPS/model.safetensors"

# (c) scancel mid-run: its SIGTERM also reaches the batch shell, which must
# see the job is cancelled and not requeue it.
id_c=$(submit c $((PORT + 5)) --time=10)
for _ in $(seq 120); do
  grep -q "step 1/$STEPS" "$TMP/jobs/c.out" 2>/dev/null && break
  sleep 0.5
done
grep -q "step 1/$STEPS" "$TMP/jobs/c.out" || fail "(c) did not start training"
scancel "$id_c"
for _ in $(seq 60); do
  [[ -z "$(squeue -h -j "$id_c" -o %i 2>/dev/null)" ]] && break
  sleep 0.5
done
result=$(job_state "$id_c")
echo "$NAME: (c) job $id_c cancelled: $result"
[[ "$result" == "CANCELLED 0" ]] || fail "(c) is '$result', not 'CANCELLED 0'"
grep -q "requeueing" "$TMP/jobs/c.out" && fail "(c) requeued itself after scancel"

# The weights: every tensor of (b) equal to (a)'s, bit for bit (the
# safetensors layout read with the standard library alone).
compare_weights 0 "$TMP/a/checkpoints/step_$STEPS/model.safetensors" \
  "$TMP/b/checkpoints/step_$STEPS/model.safetensors" ||
  fail "(b)'s weights differ from (a)'s"
echo "$NAME: PASSED"
