#!/bin/sh
# The taskmeter Erlang driver's launcher: taskmeter_beam.sh ERL DIR.
#
# The VM's flags are fixed when it starts, and three of them follow from the plan: `+S 1:1` for
# beam-1 (one scheduler), `+P` (the process table) from the plan's units and memory room, and a
# scheduler knob for the recipes that name one (`+sbwt none`, `+sbwt very_long`, `+swt
# very_low`). So this script reads the plan line first (POSIX `read` takes one byte at a time
# from a pipe, so the rest of stdin stays for the VM, whose end of file means "stop early"),
# then replaces itself with the VM (`exec`: the same pid, the same stdin, stdout and fd 3),
# handing the plan over in TASKMETER_PLAN. Only keys the orchestrator always writes are read,
# with parameter expansion (no other program is started); the driver checks the plan itself.
erl=$1
dir=$2
IFS= read -r plan || true

# $v: the string (str KEY) or the number (num KEY) of KEY in the plan, empty when it is absent.
str() { rest=${plan#*\"$1\":\"}; if [ "$rest" = "$plan" ]; then v=; else v=${rest%%\"*}; fi; }
num() { rest=${plan#*\"$1\":}; if [ "$rest" = "$plan" ]; then v=; else v=${rest%%[,\}]*}; fi; }
digits() { case $1 in '' | *[!0-9]*) return 1 ;; esac; }

str runtime; runtime=$v
str wait; wait=$v
num units; units=$v
num room_memory_bytes; room=$v

set --
case $runtime in beam-1) set -- "$@" +S 1:1 ;; esac
case $wait in
    sbwt-none) set -- "$@" +sbwt none ;;
    sbwt-very-long) set -- "$@" +sbwt very_long ;;
    swt-very-low) set -- "$@" +swt very_low ;;
esac
# The process table: every unit and the VM's own processes, but no more than the memory room
# could hold at 6 KiB a process (the driver caps its units at half the room at that size and
# more; each entry of the table costs about 12 bytes whether used or not, so +P 134217727 would
# take 1.6 GB). Never below the default, 262144.
procs=262144
if digits "$units"; then
    want=$((units + 1024))
    if digits "$room"; then
        cap=$((room / 2 / 6144 + 1024))
        [ "$want" -gt "$cap" ] && want=$cap
    fi
    [ "$want" -gt 134217727 ] && want=134217727
    [ "$want" -gt "$procs" ] && procs=$want
fi
set -- "$@" +P "$procs"

# The flags chosen here, for H's runtime_version and the driver's checks; no crash dump file in
# the working folder; the user's ERL_FLAGS would change the VM under the measurement.
export TASKMETER_PLAN="$plan" TASKMETER_BEAM_FLAGS="$*" ERL_CRASH_DUMP_SECONDS=0
unset ERL_FLAGS ERL_AFLAGS ERL_ZFLAGS
# -noinput: the VM never reads stdin (the driver does, through a port of its own); one dirty I/O
# scheduler (+SDio 1), the thread every file write of the worker runs on, named tm-writer by the
# driver; the logger on stderr, since stdout carries the frames.
exec "$erl" -noinput +SDio 1 "$@" \
    -kernel logger '[{handler,default,logger_std_h,#{config=>#{type=>standard_error}}}]' \
    -pa "$dir" -s taskmeter_driver main
