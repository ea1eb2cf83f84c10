# Shell helpers shared by the scripts in scripts/ (sourced, not run).

# kill_when_exists PID PATH [TRIES (6000)]: SIGKILLs PID as soon as PATH
# exists (looking every 10 ms), or stops looking when PID has exited or after
# TRIES looks; then reaps it.
kill_when_exists() {
  local pid=$1 path=$2 tries=${3:-6000} i
  for ((i = 0; i < tries; i++)); do
    [[ -e "$path" ]] && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.01
  done
  kill -9 "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
}
