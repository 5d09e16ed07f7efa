#!/usr/bin/env bash
# The state the differential corpus (testdata/corpus/README.md) runs its command lines in.
# Run on a fresh cluster of the lab's slurm.conf (no job ever submitted, accounting on, as
# root), with that cluster's commands first on PATH and SLURM_CONF set. It brings jobs into
# every state the corpus asks about and prints NAME=VALUE lines (the job ids); the corpus's
# command lines see them as environment variables ($DONE, $RUN1, ...).
# The same script runs on real Slurm (cargo xtask compat capture) and on Drover (the test).
set -euo pipefail

die() { echo "scenario: $*" >&2; exit 1; }

# sub NAME SBATCH-ARGS...: submits and prints NAME=ID.
sub() {
  local name=$1; shift
  local id
  id=$(sbatch --parsable "$@") || die "sbatch $* failed"
  id=${id%%;*}
  echo "$name=$id"
  eval "$name=$id"
}

# state JOB: the job's state as the controller tells it.
state() { scontrol -o show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | head -1 | cut -d= -f2; }

# wait_state JOB STATE...: until the job is in one of the states (60 s at most).
wait_state() {
  local job=$1; shift
  for _ in $(seq 300); do
    local s
    s=$(state "$job")
    for want in "$@"; do [ "$s" = "$want" ] && return 0; done
    sleep 0.2
  done
  die "job $job is ${s:-unknown}, not $*"
}

# wait_acct JOB STATE: until accounting has the job's allocation in that state (30 s at most;
# "CANCELLED by 0" is CANCELLED).
wait_acct() {
  for _ in $(seq 150); do
    case "$(sacct -n -X -P -j "$1" -o state 2>/dev/null | head -1)" in "$2"*) return 0 ;; esac
    sleep 0.2
  done
  die "accounting has not job $1 $2"
}

sacctmgr -i add account physics Description=physics Organization=science >/dev/null
sacctmgr -i add account theory parent=physics Description=theory Organization=science >/dev/null
sacctmgr -i add user root Account=physics >/dev/null

# Finished jobs: completed, failed, with steps, cancelled while running.
sub DONE -J done -o /dev/null --wrap true
wait_state "$DONE" COMPLETED
sub FAIL -J fail -o /dev/null --wrap 'exit 3'
wait_state "$FAIL" FAILED
sub STEPS -J steps -N2 -n2 -o /dev/null --wrap 'srun true; srun -n1 -N1 false; true'
wait_state "$STEPS" COMPLETED
sub CANRUN -J canrun -o /dev/null --wrap 'sleep 600'
wait_state "$CANRUN" RUNNING
scancel "$CANRUN"
wait_state "$CANRUN" CANCELLED
sub PHYS -J phys -A physics --comment 'a comment' -o /dev/null --wrap true
wait_state "$PHYS" COMPLETED

# Running jobs, one with a running step.
sub RUN1 -J run1 -t 2:00:00 -o /dev/null --wrap 'sleep 600'
wait_state "$RUN1" RUNNING
sub RUN2 -J run2 -p gpu -N2 -n3 --gres=gpu:1 -t 1-00:00:00 -o /dev/null --wrap 'srun sleep 600'
wait_state "$RUN2" RUNNING
for _ in $(seq 150); do squeue -h -s -j "$RUN2" -o %i | grep -q "^$RUN2\.0$" && break; sleep 0.2; done

# An array, throttled to two tasks at a time: 0 and 1 run, the rest wait.
sub ARR -J arr -a 0-5%2 -t 3:00:00 -o /dev/null --wrap 'sleep 600'
wait_state "${ARR}_1" RUNNING

# Pending jobs: held, waiting on a dependency, waiting for resources, for priority.
sub HELD -J held -H -o /dev/null --wrap true
sub DEP -J dep -d "afterok:$RUN1" -o /dev/null --wrap true
sub BIG -J big -N4 --exclusive -t 4:00:00 -o /dev/null --wrap true
wait_state "$BIG" PENDING
sub LATER -J later -n1 --begin=now+2hours -o /dev/null --wrap true

# Cancelled before it could ever run (held).
sub CANPD -J canpd -H -o /dev/null --wrap true
scancel "$CANPD"
wait_state "$CANPD" CANCELLED

# A node drained with a reason.
scontrol update nodename=node4 state=drain reason=maint

wait_acct "$DONE" COMPLETED
wait_acct "$CANRUN" CANCELLED
wait_acct "$RUN1" RUNNING
wait_acct "$ARR"_1 RUNNING
sleep 1
