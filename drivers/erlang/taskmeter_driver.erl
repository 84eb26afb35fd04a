%% The taskmeter Erlang driver, worker protocol v6 (protocol/README.md). It serves "beam" (an
%% Erlang process per unit, on the schedulers the VM starts on the worker's CPUs) and "beam-1"
%% (the same on one scheduler, +S 1:1). Erlang/OTP 25 or newer, standard library only, Linux.
%% taskmeter_beam.sh starts the VM with the flags the plan needs and hands the plan over in
%% TASKMETER_PLAN; see README.md.
-module(taskmeter_driver).
-export([main/0]).

-define(M32, 16#FFFFFFFF).
%% The worker protocol this driver speaks: the plan's, and H's.
-define(PROTOCOL, 6).
%% The shared flags (one atomics array): stdin closed, a unit stopped early, the atomic-sum counter.
-define(STOP, 1).
-define(INTERRUPTED, 2).
-define(COUNTER, 3).
%% A unit's ring (one atomics array, unsigned): head, tail, origin, then ring x 4 sample words
%% (start, busy_end, intended, wake).
-define(HEAD, 1).
-define(TAIL, 2).
-define(ORIGIN, 3).
-define(SLOTS, 4).
%% The writer's writes are about a megabyte; a frame holds at most 16,384 samples.
-define(WRITE_BYTES, 1048576).
-define(FRAME_SAMPLES, 16384).
%% The recipes that are the runtime's own sleep in a VM started with a scheduler knob, and the
%% flag each needs (taskmeter_beam.sh gives it).
-define(KNOBS, [{<<"sbwt-none">>, "+sbwt none"}, {<<"sbwt-very-long">>, "+sbwt very_long"},
                {<<"swt-very-low">>, "+swt very_low"}]).
-define(RECIPES, [<<"receive-after">>, <<"timer-sleep">>, <<"spin">>, <<"hybrid">>]).
%% Memory a unit takes beside its ring, estimated high: measured, 2.9 KiB a parked process (its
%% heap of 233 words, its control block, its ring's header), 5.0 KiB a running unit.
-define(UNIT_BYTES, 6144).

%% A unit's fixed part of the loop (protocol: "The work loop, exactly").
-record(u, {id, class, ring, rs, coord, flags, absolute, schedule, sleep_ns, modulo, busy_iters,
            busy_yield, wait, atomic_sum, measure_start = 0, end_ns = 0, origin = 0}).

%% ---------- clock ----------

%% CLOCK_MONOTONIC in ns: os:perf_counter/0 is erts_sys_hrtime(), clock_gettime(CLOCK_MONOTONIC)
%% on Linux, counted in ns (main/0 checks both before it accepts a plan; README.md).
mono_ns() -> os:perf_counter().

%% Erlang monotonic time less CLOCK_MONOTONIC, in ns, read now: Erlang's clock is the OS's plus
%% an offset that time correction may move (by up to 1 % of its rate), so it is read afresh for
%% every deadline.
offset() ->
    A = mono_ns(),
    M = erlang:monotonic_time(nanosecond),
    M - (A + mono_ns()) div 2.

floor_div(A, B) when A >= 0 -> A div B;
floor_div(A, B) -> -((B - 1 - A) div B).

ceil_div(A, B) -> -floor_div(-A, B).

%% os:perf_counter/0 must count ns of CLOCK_MONOTONIC: its unit is 10^9 per second, and it reads
%% what erlang:system_info(os_monotonic_time_source) says is CLOCK_MONOTONIC, within the call.
check_clock() ->
    Unit = erlang:convert_time_unit(1000000000, perf_counter, nanosecond),
    Source = erlang:system_info(os_monotonic_time_source),
    Before = mono_ns(),
    [Os] = [T || {time, T} <- erlang:system_info(os_monotonic_time_source)],
    After = mono_ns(),
    OsNs = erlang:convert_time_unit(Os, native, nanosecond),
    case {Unit, proplists:get_value(clock_id, Source)} of
        {1000000000, 'CLOCK_MONOTONIC'} when Before - 1000000 =< OsNs, OsNs =< After + 1000000 -> ok;
        Other ->
            fail(1, "os:perf_counter/0 is not CLOCK_MONOTONIC in ns here (~p ns a second, ~p; "
                    "it read ~b and ~b around the OS monotonic clock's ~b)", [Unit, Other, Before, After, OsNs])
    end.

%% ---------- frames ----------

frame(Kind, Payload) -> <<Kind, (byte_size(Payload)):32/little, Payload/binary>>.

json(Kind, Pairs) ->
    frame(Kind, iolist_to_binary([${, lists:join($,, [[$", K, $", $:, value(V)] || {K, V} <- Pairs]), $}])).

value(V) when is_integer(V) -> integer_to_binary(V);
value(V) when is_atom(V) -> atom_to_binary(V); % true, false, null
value(V) when is_binary(V) -> [$", [escape(C) || <<C>> <= V], $"];
value(V) when is_list(V) -> value(unicode:characters_to_binary(V)).

escape($") -> <<"\\\"">>;
escape($\\) -> <<"\\\\">>;
escape(C) when C < 32 -> io_lib:format("\\u~4.16.0b", [C]);
escape(C) -> C.

%% stdout is the coordinator's own raw file (opened again through /proc, for appending: a raw
%% write is one write(2), and nothing of the VM's io system touches it).
emit(Frames) ->
    case file:write(get(stdout), Frames) of
        ok -> ok;
        {error, _} -> erlang:halt(1) % the orchestrator is gone: no one is left to tell
    end.

%% An E frame and the exit: status 2 for a refused plan, 1 for a failure.
fail(Status, Format, Args) ->
    Message = unicode:characters_to_binary(io_lib:format(Format, Args)),
    case get(stdout) of
        undefined -> ok;
        _ -> emit(json($E, [{"message", Message}]))
    end,
    io:format(standard_error, "taskmeter erlang driver: ~ts~n", [Message]),
    erlang:halt(Status).

%% An S or F frame of a ring's samples at positions From to To - 1.
samples(Kind, Id, Ring, RS, From, To) ->
    Origin = atomics:get(Ring, ?ORIGIN),
    Words = << <<(atomics:get(Ring, ?SLOTS + (P rem RS) * 4 + J)):64/little>>
               || P <- lists:seq(From, To - 1), J <- [0, 1, 2, 3] >>,
    frame(Kind, <<Id:32/little, (To - From):32/little, Origin:64/little, From:64/little, Words/binary>>).

%% ---------- the plan ----------

%% The flat plan, already checked by the orchestrator: "key":value pairs of integers, null,
%% booleans and plain strings (no escapes). Erlang/OTP 25 has no JSON module.
parse_plan(Text) ->
    try
        <<"{", Rest/binary>> = string:trim(Text),
        pairs(Rest, #{})
    catch
        _:_ -> error
    end.

pairs(<<"}", _/binary>>, Plan) -> {ok, Plan};
pairs(<<",", Rest/binary>>, Plan) -> pairs(Rest, Plan);
pairs(<<"\"", Rest/binary>>, Plan) ->
    [Key, <<":", After/binary>>] = binary:split(Rest, <<"\"">>),
    {Value, More} = json_value(After),
    pairs(More, Plan#{Key => Value}).

json_value(<<"\"", Rest/binary>>) ->
    [Text, More] = binary:split(Rest, <<"\"">>),
    {Text, More};
json_value(<<"null", More/binary>>) -> {null, More};
json_value(<<"true", More/binary>>) -> {true, More};
json_value(<<"false", More/binary>>) -> {false, More};
json_value(Text) ->
    {Digits, More} = lists:splitwith(fun(C) -> C =:= $- orelse (C >= $0 andalso C =< $9) end,
                                     binary_to_list(Text)),
    {list_to_integer(Digits), list_to_binary(More)}.

plan(Plan, Key) -> maps:get(Key, Plan).

%% ---------- busy work ----------

%% The protocol's arithmetic on an unsigned 64-bit integer with wrap-around. The BEAM has no 64-bit
%% machine integer (a small integer has 60 bits; above them an integer is a bignum on the heap),
%% so the value is carried as two 32-bit halves, every intermediate a small integer: the same
%% arithmetic and result, about 9 ns an iteration here and no garbage, where masking a bignum
%% (`((T + 1) * 3 band Mask) bsr 1`) takes 124 ns and allocates every step (README.md).
busy(Iters, Yield) -> busy(Iters, Yield, 0, 0).

busy(0, _, Hi, Lo) -> (Hi bsl 32) bor Lo;
busy(I, Yield, Hi, Lo) ->
    {Hi1, Lo1} = case Lo of % total + 1
                     ?M32 -> {(Hi + 1) band ?M32, 0};
                     _ -> {Hi, Lo + 1}
                 end,
    Low = Lo1 * 3, % total * 3, mod 2^64
    High = (Hi1 * 3 + (Low bsr 32)) band ?M32,
    Yield andalso erlang:yield(),
    busy(I - 1, Yield, High bsr 1, ((Low band ?M32) bsr 1) bor ((High band 1) bsl 31)). % / 2

%% ---------- sleeping, and the wait recipes ----------

%% The runtime's own absolute sleep: erlang:start_timer/4 with {abs, true} at the deadline in
%% Erlang monotonic time, whole milliseconds rounded up (the timer's unit), called even when the
%% deadline has passed; again if Erlang's corrected clock fired it early.
sleep_until(Deadline) ->
    Ms = ceil_div(Deadline + offset(), 1000000),
    Timer = erlang:start_timer(Ms, self(), wake, [{abs, true}]),
    receive {timeout, Timer, wake} -> ok end,
    case mono_ns() < Deadline of
        true -> sleep_until(Deadline);
        false -> ok
    end.

%% Wait recipes (protocol: "Wait recipes"): other ways to wait until an absolute CLOCK_MONOTONIC
%% deadline in ns (mono_ns/0 above), each a function to copy into a program.

%% receive ... after for what is left, in whole ms rounded up: the way most Erlang code waits.
receive_after_until(Deadline) ->
    case Deadline - mono_ns() of
        Left when Left > 0 ->
            receive after ceil_div(Left, 1000000) -> ok end,
            receive_after_until(Deadline);
        _ -> ok
    end.

%% timer:sleep/1 for what is left, in whole ms rounded up (stdlib's timer:sleep/1 is itself a
%% receive after: timer.erl).
timer_sleep_until(Deadline) ->
    case Deadline - mono_ns() of
        Left when Left > 0 ->
            timer:sleep(ceil_div(Left, 1000000)),
            timer_sleep_until(Deadline);
        _ -> ok
    end.

%% Reads the clock until the deadline. The process still yields its scheduler every 4,000
%% reductions or so (the BEAM preempts on reductions), so it starves no other process.
spin_until(Deadline) ->
    case mono_ns() < Deadline of
        true -> spin_until(Deadline);
        false -> ok
    end.

%% Sleeps (erlang:start_timer, absolute) to the last whole Erlang millisecond at least 1 ms
%% before the deadline, then spins: the timer fires at a millisecond tick, late by the
%% scheduler's wake-up, so 1 to 2 ms are left to spin.
hybrid_until(Deadline) ->
    Ms = floor_div(Deadline + offset(), 1000000) - 1,
    Timer = erlang:start_timer(Ms, self(), wake, [{abs, true}]),
    receive {timeout, Timer, wake} -> ok end,
    spin_until(Deadline).

recipe(<<"receive-after">>) -> fun receive_after_until/1;
recipe(<<"timer-sleep">>) -> fun timer_sleep_until/1;
recipe(<<"spin">>) -> fun spin_until/1;
recipe(<<"hybrid">>) -> fun hybrid_until/1.

%% ---------- a unit ----------

%% A unit's process: its priority class, its ring, the gate, then the loop.
unit(U = #u{id = Id, coord = Coord}) ->
    try
        case take_class(U#u.class) of
            ok ->
                Ring = case U#u.schedule of
                           none -> none;
                           % zeroed by atomics:new: every word written before the gate
                           _ -> atomics:new(?SLOTS - 1 + 4 * U#u.rs, [{signed, false}])
                       end,
                Coord ! {parked, Id, Ring, self()},
                receive {go, RunStart, MeasureStart, End} -> ok end,
                _ = RunStart,
                Origin = mono_ns(),
                Ring =/= none andalso atomics:put(Ring, ?ORIGIN, Origin),
                Ready = U#u{ring = Ring, measure_start = MeasureStart, end_ns = End, origin = Origin},
                {N, NMeas, Lost, Busy} = loop(Ready, 0, Origin + expected(Ready, 0), 0, 0, 0, 0, 0),
                Coord ! {ended, Id, Origin, N, NMeas, Lost, Busy};
            {error, Why} -> Coord ! {failed, Id, Why}
        end
    catch
        Class:Reason:Stack -> Coord ! {crashed, Id, {Class, Reason, Stack}}
    end.

%% Class 0 runs at priority high, class 1 at low (process_flag/2), read back.
take_class(none) -> ok;
take_class(Class) ->
    Want = element(Class + 1, {high, low}),
    process_flag(priority, Want),
    case process_info(self(), priority) of
        {priority, Want} -> ok;
        Other -> {error, io_lib:format("set priority ~p, but process_info says ~p", [Want, Other])}
    end.

expected(#u{schedule = fixed, sleep_ns = S}, _) -> S;
expected(#u{schedule = by_unit, sleep_ns = S, id = Id}, _) -> Id * S;
expected(#u{schedule = modulo, sleep_ns = S, modulo = M}, K) -> (K rem M + 1) * S;
expected(#u{schedule = none}, _) -> 0.

loop(U, K, Next, Head, N, NMeas, Lost, Busy) ->
    T0 = mono_ns(),
    Stop = T0 < U#u.end_ns andalso atomics:get(U#u.flags, ?STOP) =:= 1,
    Stop andalso atomics:put(U#u.flags, ?INTERRUPTED, 1),
    case T0 >= U#u.end_ns orelse Stop of
        true -> {N, NMeas, Lost, Busy};
        false ->
            {T1, Busy1} = case U#u.busy_iters of
                              0 -> {T0, Busy};
                              Iters -> R = busy(Iters, U#u.busy_yield), {mono_ns(), R}
                          end,
            Measured = case T0 >= U#u.measure_start of true -> 1; false -> 0 end,
            case U#u.schedule of
                none ->
                    erlang:yield(),
                    count(U),
                    loop(U, K, Next, Head, N + 1, NMeas + Measured, Lost, Busy1);
                _ ->
                    Intended = case U#u.absolute of
                                   true -> Next;
                                   false -> T1 + expected(U, K)
                               end,
                    wait(U, Intended, K),
                    T2 = mono_ns(),
                    K1 = K + 1,
                    {K2, Next2} = case U#u.absolute of
                                      true -> overrun(U, K1, Next + expected(U, K1), T2);
                                      false -> {K1, Next}
                                  end,
                    count(U),
                    % The orchestrator derives the period and the periods missed (since protocol v5).
                    Lost1 = Lost + put_sample(U, Head, [T0, T1, Intended, T2]),
                    loop(U, K2, Next2, Head + 1, N + 1, NMeas + Measured, Lost1, Busy1)
            end
    end.

%% The runtime's own sleep: receive ... after in relative mode, start_timer at the deadline in
%% absolute mode; or the plan's recipe until the deadline.
wait(#u{wait = own, absolute = false} = U, _, K) ->
    receive after ceil_div(expected(U, K), 1000000) -> ok end;
wait(#u{wait = own}, Intended, _) -> sleep_until(Intended);
wait(#u{wait = Recipe}, Intended, _) -> Recipe(Intended).

%% Periods skipped: the deadlines after the intended one that the wake-up passed.
overrun(U, K, Next, T2) when T2 > Next -> overrun(U, K + 1, Next + expected(U, K + 1), T2);
overrun(_, K, Next, _) -> {K, Next}.

count(#u{atomic_sum = true, flags = Flags}) -> atomics:add(Flags, ?COUNTER, 1);
count(_) -> ok.

%% Puts a sample at position Head (the ring is the unit's: it alone moves head). A full ring
%% (the writer fell behind) is first written by the unit itself; returns the samples lost.
put_sample(#u{ring = Ring, rs = RS} = U, Head, Sample) ->
    Tail = atomics:get(Ring, ?TAIL),
    Lost = case Head - Tail of
               RS -> write_own(U, Tail, Head);
               _ -> 0
           end,
    put_words(Ring, ?SLOTS + (Head rem RS) * 4, Sample),
    atomics:put(Ring, ?HEAD, Head + 1), % atomics are sequentially consistent: after the words
    Lost.

put_words(_, _, []) -> ok;
put_words(Ring, I, [Word | Rest]) -> atomics:put(Ring, I, Word), put_words(Ring, I + 1, Rest).

%% The ring is full (tail was read at Tail): the unit takes its samples back by a compare-and-swap
%% of tail (if it fails, the writer took them and there is room) and appends them to the sample
%% file as one F frame itself, in one write, through a raw file of its own (a raw file serves only
%% the process that opened it), never waiting for the writer. A failed write loses them.
write_own(#u{ring = Ring, rs = RS, id = Id}, Tail, Head) ->
    case atomics:compare_exchange(Ring, ?TAIL, Tail, Head) of
        ok ->
            Frame = samples($F, Id, Ring, RS, Tail, Head),
            case file:open("/proc/self/fd/3", [append, raw, binary]) of
                {ok, File} ->
                    Written = file:write(File, Frame),
                    _ = file:close(File),
                    case Written of
                        ok -> 0;
                        {error, _} -> Head - Tail
                    end;
                {error, _} -> Head - Tail
            end;
        _ -> 0
    end.

%% ---------- the writer ----------

%% The one writer: a process at priority max, above every unit; its writes run on the VM's one
%% dirty I/O scheduler, the thread named tm-writer. It opens the sample file before the units
%% start, then every flush_ns (or at once when told the units have ended) appends what each ring
%% holds as S frames; after the units ended, one last time.
writer(Coord, FlushMs) ->
    process_flag(priority, max),
    case file:open("/proc/self/fd/3", [append, raw, binary]) of
        {ok, File} ->
            Coord ! {writer, self()},
            receive {go, Rings, RS} -> write_loop(Coord, File, Rings, RS, FlushMs) end;
        {error, Why} -> Coord ! {writer_failed, Why}
    end.

write_loop(Coord, File, Rings, RS, FlushMs) ->
    Last = receive last -> true after FlushMs -> false end,
    {Buf, _} = lists:foldl(fun({Id, Ring}, Acc) -> drain(File, Id, Ring, RS, Acc) end, {[], 0}, Rings),
    write_samples(File, Buf),
    case Last of
        true -> Coord ! written;
        false -> write_loop(Coord, File, Rings, RS, FlushMs)
    end.

%% A unit's samples as S frames, each kept only if the compare-and-swap of tail from the value read
%% succeeds (which gives their slots back to the unit); if it fails, the unit took those samples
%% itself meanwhile (and may be rewriting their slots): the copy is dropped.
drain(File, Id, Ring, RS, {Buf, Bytes}) ->
    drain(File, Id, Ring, RS, atomics:get(Ring, ?TAIL), atomics:get(Ring, ?HEAD), Buf, Bytes).

drain(File, Id, Ring, RS, Tail, Head, Buf, Bytes) when Tail < Head ->
    To = Tail + min(Head - Tail, ?FRAME_SAMPLES),
    Frame = samples($S, Id, Ring, RS, Tail, To),
    case atomics:compare_exchange(Ring, ?TAIL, Tail, To) of
        ok when Bytes + byte_size(Frame) >= ?WRITE_BYTES ->
            write_samples(File, [Frame | Buf]),
            drain(File, Id, Ring, RS, To, Head, [], 0);
        ok -> drain(File, Id, Ring, RS, To, Head, [Frame | Buf], Bytes + byte_size(Frame));
        _ -> {Buf, Bytes}
    end;
drain(_, _, _, _, _, _, Buf, Bytes) -> {Buf, Bytes}.

%% Whole frames in one write(2): flattened first, since a raw write of many pieces is a writev
%% of at most IOV_MAX pieces at a time, and a unit's F frame could come between two.
write_samples(_, []) -> ok;
write_samples(File, Buf) ->
    case file:write(File, iolist_to_binary(lists:reverse(Buf))) of
        ok -> ok;
        {error, Why} ->
            io:format(standard_error, "taskmeter erlang driver: cannot append to the sample file: ~p~n", [Why]),
            erlang:halt(1)
    end.

%% ---------- main ----------

main() ->
    try run() catch
        Class:Reason:Stack ->
            io:format(standard_error, "taskmeter erlang driver: ~p:~p~n~p~n", [Class, Reason, Stack]),
            erlang:halt(1)
    end.

run() ->
    PlanRead = mono_ns(), % start_limit_ns counts from here (taskmeter_beam.sh read the line)
    {ok, Stdout} = file:open("/proc/self/fd/1", [append, raw, binary]),
    put(stdout, Stdout),
    Flags = os:getenv("TASKMETER_BEAM_FLAGS", ""),
    Plan = case parse_plan(unicode:characters_to_binary(os:getenv("TASKMETER_PLAN", ""))) of
               {ok, P} -> P;
               error -> fail(2, "the plan is not a flat JSON object (taskmeter_beam.sh passes it in TASKMETER_PLAN)", [])
           end,
    Runtime = maps:get(<<"runtime">>, Plan, null),
    Wait = case maps:get(<<"wait">>, Plan, <<"sleep">>) of
               <<"sleep">> -> own;
               W -> W
           end,
    Knob = case Wait of
               own -> none;
               _ -> proplists:get_value(Wait, ?KNOBS, none)
           end,
    case maps:get(<<"protocol">>, Plan, null) of
        ?PROTOCOL -> ok;
        Protocol -> fail(2, "unsupported protocol version ~p (this worker speaks ~b)", [Protocol, ?PROTOCOL])
    end,
    lists:member(Runtime, [<<"beam">>, <<"beam-1">>]) orelse
        fail(2, "runtime ~ts is not served by this driver (beam, beam-1)", [value(Runtime)]),
    Wait =:= own orelse Knob =/= none orelse lists:member(Wait, ?RECIPES) orelse
        fail(2, "runtime ~s has no wait recipe ~ts", [Runtime, value(Wait)]),
    Knob =:= none orelse string:find(Flags, Knob) =/= nomatch orelse
        fail(2, "the recipe ~s needs the VM started with ~s (taskmeter_beam.sh gives it)", [Wait, Knob]),
    Runtime =:= <<"beam">> orelse erlang:system_info(schedulers_online) =:= 1 orelse
        fail(2, "beam-1 needs the VM started with one scheduler, +S 1:1 (taskmeter_beam.sh gives it)", []),
    check_clock(),
    Experiment = plan(Plan, <<"experiment">>),
    Classes = plan(Plan, <<"classes">>),
    Priority = case Classes of
                   1 -> <<"none">>;
                   _ -> <<"beam: high, low (process_flag(priority, high | low) on each unit, read back with process_info)">>
               end,
    Version = io_lib:format("Erlang/OTP ~s, erts ~s, schedulers ~b of ~b online, ~s",
                            [erlang:system_info(otp_release), erlang:system_info(version),
                             erlang:system_info(schedulers_online), erlang:system_info(schedulers), Flags]),
    Hello = [{"protocol", ?PROTOCOL}, {"runtime", Runtime}, {"runtime_version", Version},
             {"clock", <<"CLOCK_MONOTONIC">>}, {"pid", list_to_integer(os:getpid())}, {"priority", Priority}]
        ++ [{"wait", Wait} || Wait =/= own],
    emit(json($H, Hello)),
    Shared = atomics:new(3, [{signed, false}]),
    spawn(fun() -> watch_stdin(Shared) end),
    case Experiment of
        <<"granularity">> -> grains(Plan, Shared, PlanRead);
        _ -> work(Plan, Shared, PlanRead, Runtime, Wait, Knob, Classes)
    end,
    erlang:halt(0).

%% End of file on stdin after the plan: stop early. The VM was started with -noinput, so the
%% driver reads fd 0 through a port of its own (non-blocking, in the VM's poll set).
watch_stdin(Shared) ->
    process_flag(priority, max),
    Port = open_port({fd, 0, 1}, [in, binary, eof]),
    watch_stdin(Shared, Port).

watch_stdin(Shared, Port) ->
    receive
        {Port, {data, _}} -> watch_stdin(Shared, Port);
        {Port, eof} -> atomics:put(Shared, ?STOP, 1)
    end.

%% The sleep and atomic-sum loops.
work(Plan, Shared, PlanRead, Runtime, Wait, Knob, Classes) ->
    check_sample_file(),
    % The thread of the one dirty I/O scheduler, where every write to the sample file runs: the
    % open runs there, so /proc/thread-self is that thread.
    {ok, Comm} = file:open("/proc/thread-self/comm", [write, raw, binary]),
    ok = file:write(Comm, <<"tm-writer">>),
    ok = file:close(Comm),
    Coord = self(),
    Writer = spawn(fun() -> writer(Coord, ceil_div(plan(Plan, <<"flush_ns">>), 1000000)) end),
    receive
        {writer, Writer} -> ok;
        {writer_failed, Why} -> fail(1, "the writer cannot open the sample file: ~p", [Why])
    end,
    process_flag(priority, max), % the start and the gate run above every unit
    Schedule = case plan(Plan, <<"schedule">>) of
                   <<"fixed">> -> fixed;
                   <<"by-unit">> -> by_unit;
                   <<"modulo">> -> modulo;
                   <<"none">> -> none
               end,
    Template = #u{coord = Coord, flags = Shared, rs = plan(Plan, <<"ring">>),
                  absolute = plan(Plan, <<"mode">>) =:= <<"absolute">>, schedule = Schedule,
                  sleep_ns = plan(Plan, <<"sleep_ns">>), modulo = plan(Plan, <<"modulo">>),
                  busy_iters = plan(Plan, <<"busy_iters">>), busy_yield = plan(Plan, <<"busy_yield">>),
                  wait = case {Wait, Knob} of
                             {own, _} -> own;
                             {_, none} -> recipe(Wait);
                             _ -> own % a knob's row: the runtime's own sleep in a VM with the flag
                         end,
                  atomic_sum = plan(Plan, <<"experiment">>) =:= <<"atomic-sum">>},
    Units = plan(Plan, <<"units">>),
    {Limit, LimitWhy} = limit_units(Plan, Runtime),
    Limit >= 1 orelse fail(1, "cannot start unit 1: ~ts", [LimitWhy]),
    CreateStart = mono_ns(),
    {Started, StartError} = start_units(Template, Classes, Units, Limit, LimitWhy, Plan, PlanRead),
    Rings = parked(Started, []),
    RunStart = mono_ns(),
    MeasureStart = RunStart + plan(Plan, <<"warmup_ns">>),
    End = MeasureStart + plan(Plan, <<"duration_ns">>),
    emit(json($G, [{"create_start_ns", CreateStart}, {"run_start_ns", RunStart}, {"units", Started}]
                  ++ [{"start_error", StartError} || StartError =/= none])),
    Writer ! {go, [{Id, Ring} || {Id, Ring, _} <- Rings, Ring =/= none], Template#u.rs},
    [Pid ! {go, RunStart, MeasureStart, End} || {_, _, Pid} <- Rings],
    io:format(standard_error, "taskmeter erlang driver: ~s started ~b of ~b units in ~.3f s~n",
              [Runtime, Started, Units, (RunStart - CreateStart) / 1.0e9]),
    Ended = ended(Started, []),
    Writer ! last,
    receive written -> ok end,
    % Binary, 36 bytes: unit (u32), origin, iterations, measured iterations, lost (u64).
    UFrames = [frame($U, <<Id:32/little, Origin:64/little, N:64/little, NMeas:64/little, Lost:64/little>>)
               || {Id, Origin, N, NMeas, Lost, _} <- lists:keysort(1, Ended)],
    emit_all(UFrames, [], 0),
    BusyResult = case [B || {_, _, N, _, _, B} <- Ended, N > 0] of
                     [B | _] -> B;
                     [] -> busy(Template#u.busy_iters, false) % no unit got to run a busy phase
                 end,
    Done = [{"interrupted", atomics:get(Shared, ?INTERRUPTED) =:= 1},
            {"busy_result", integer_to_binary(BusyResult)}]
        ++ [{"atomic_sum", atomics:get(Shared, ?COUNTER)} || Template#u.atomic_sum],
    emit(json($D, Done)).

%% Frames to stdout in writes of about a megabyte.
emit_all([], Buf, _) -> emit(lists:reverse(Buf));
emit_all([F | Rest], Buf, Bytes) when Bytes >= ?WRITE_BYTES -> emit(lists:reverse(Buf)), emit_all([F | Rest], [], 0);
emit_all([F | Rest], Buf, Bytes) -> emit_all(Rest, [F | Buf], Bytes + byte_size(F)).

%% Started by hand, fd 3 may be an unrelated file: write only to one open for appending and
%% writing (Erlang cannot ask fcntl(F_GETFL): /proc/self/fdinfo/3 says the same, in octal).
check_sample_file() ->
    Refuse = fun() -> fail(2, "fd 3, the sample file, is not open for appending (taskmeter opens it for every worker it starts)", []) end,
    case file:read_file("/proc/self/fdinfo/3") of
        {ok, Info} ->
            case re:run(Info, "^flags:\\s*([0-7]+)", [multiline, {capture, all_but_first, list}]) of
                {match, [Octal]} ->
                    FdFlags = list_to_integer(Octal, 8),
                    case {FdFlags band 8#2000, FdFlags band 3} of
                        {0, _} -> Refuse();
                        {_, 0} -> Refuse(); % O_RDONLY
                        _ -> ok
                    end;
                _ -> Refuse()
            end;
        {error, _} -> Refuse()
    end.

%% Units 1, 2, ... in order, each parked at the gate (protocol: "Starting units"): before unit
%% u > 1, the start stops when stdin was closed, when start_limit_ns has passed since the plan was
%% read, at the memory room's limit, or when the VM refuses a process.
start_units(Template, Classes, Units, Limit, LimitWhy, Plan, PlanRead) ->
    StartLimit = plan(Plan, <<"start_limit_ns">>),
    MaxMaps = plan(Plan, <<"max_map_count">>),
    Start = fun Start(Id) when Id > Units -> {Units, none};
                Start(Id) ->
                    Why = if
                              Id =:= 1 -> none;
                              Id > Limit -> LimitWhy;
                              true -> stop_why(Template#u.flags, Id, StartLimit, PlanRead, MaxMaps)
                          end,
                    case Why of
                        none ->
                            Class = case Classes of 1 -> none; _ -> (Id - 1) rem 2 end,
                            U = Template#u{id = Id, class = Class},
                            try spawn(fun() -> unit(U) end) of
                                _ -> Start(Id + 1)
                            catch
                                error:system_limit when Id > 1 ->
                                    {Id - 1, io_lib:format("the VM refused process ~b (system_limit: ~b processes, +P)",
                                                          [Id, erlang:system_info(process_limit)])};
                                error:system_limit ->
                                    fail(1, "cannot start unit 1: system_limit", [])
                            end;
                        _ -> {Id - 1, Why}
                    end
            end,
    Start(1).

stop_why(Shared, Id, StartLimit, PlanRead, MaxMaps) ->
    case atomics:get(Shared, ?STOP) of
        1 -> io_lib:format("stop requested (stdin closed); units started: ~b", [Id - 1]);
        _ ->
            case mono_ns() - PlanRead >= StartLimit of
                true -> io_lib:format("start limit of ~s reached; units started: ~b", [seconds(StartLimit), Id - 1]);
                false when Id rem 4096 =:= 0, is_integer(MaxMaps) -> maps_why(Id, MaxMaps);
                false -> none
            end
    end.

seconds(Ns) when Ns rem 1000000000 =:= 0 -> io_lib:format("~b s", [Ns div 1000000000]);
seconds(Ns) -> io_lib:format("~.3f s", [Ns / 1.0e9]).

%% The VM maps memory in carriers of a megabyte or more, not per process, so vm.max_map_count
%% is far away; counted anyway every 4,096 units, keeping 1,024 maps.
maps_why(Id, MaxMaps) ->
    {ok, Maps} = file:read_file("/proc/self/maps"),
    InUse = length(binary:matches(Maps, <<"\n">>)),
    case InUse + 1024 >= MaxMaps of
        true -> io_lib:format("stopped before unit ~b: ~b memory maps in use, vm.max_map_count ~b", [Id, InUse, MaxMaps]);
        false -> none
    end.

%% The BEAM cannot recover from memory it cannot allocate (it aborts the whole VM), so the driver
%% starts no more units than half the memory room at about UNIT_BYTES a unit with its ring (and
%% the F frame it may build), and no more than the process table holds.
limit_units(Plan, Runtime) ->
    Ring = case plan(Plan, <<"schedule">>) of
               <<"none">> -> 0;
               _ -> 2 * 32 * plan(Plan, <<"ring">>)
           end,
    PerUnit = ?UNIT_BYTES + Ring,
    Table = erlang:system_info(process_limit) - erlang:system_info(process_count) - 64,
    TableWhy = io_lib:format("~s stops at ~b units: the VM's process table holds ~b processes (+P, set by "
                             "taskmeter_beam.sh from the plan's units and memory room), of which ~b are the VM's own",
                             [Runtime, Table, erlang:system_info(process_limit), erlang:system_info(process_count) + 64]),
    case plan(Plan, <<"room_memory_bytes">>) of
        Room when is_integer(Room), Room div 2 div PerUnit < Table ->
            N = Room div 2 div PerUnit,
            {N, io_lib:format("~s stops at ~b units: the VM aborts when it runs out of memory, so units are capped "
                              "at half of ~ts at about ~b KiB per unit with its ring",
                              [Runtime, N, plan(Plan, <<"room_memory_why">>), PerUnit div 1024])};
        _ -> {Table, TableWhy}
    end.

%% Every started unit parked at the gate, with its ring.
parked(0, Rings) -> Rings;
parked(Left, Rings) ->
    receive
        {parked, Id, Ring, Pid} -> parked(Left - 1, [{Id, Ring, Pid} | Rings]);
        {failed, Id, Why} -> fail(1, "unit ~b could not take its priority class: ~ts", [Id, Why]);
        {crashed, Id, Crash} -> fail(1, "unit ~b failed: ~p", [Id, Crash])
    end.

%% Every unit's end: {Id, Origin, N, NMeas, Lost, Busy}.
ended(0, Ended) -> Ended;
ended(Left, Ended) ->
    receive
        {ended, Id, Origin, N, NMeas, Lost, Busy} -> ended(Left - 1, [{Id, Origin, N, NMeas, Lost, Busy} | Ended]);
        {crashed, Id, Crash} ->
            io:format(standard_error, "taskmeter erlang driver: unit ~b failed: ~p~n", [Id, Crash]),
            erlang:halt(1)
    end.

%% ---------- the granularity experiment ----------

%% A task is a spawned process that does its busy work and sends its result in a message
%% (protocol: "The granularity experiment"): to the round in trivial and stencil; in chain it
%% spawns the next task of its chain with its result, and the last one sends to the round.
%% The counts are one atomics array: started, completed, wrong.
-define(STARTED, 1).
-define(COMPLETED, 2).
-define(WRONG, 3).

grains(Plan, Shared, PlanRead) ->
    emit(json($G, [{"create_start_ns", PlanRead}, {"run_start_ns", mono_ns()}, {"units", 1}])),
    Calibrate = plan(Plan, <<"calibrate_ns">>),
    Grains = [binary_to_integer(G) || G <- binary:split(plan(Plan, <<"grains_ns">>), <<",">>, [global])],
    Cores = min(erlang:system_info(schedulers_online), erlang:system_info(logical_processors_available)),
    PerIter = ns_per_iter(Calibrate),
    Counts = atomics:new(3, [{signed, false}]),
    Interrupted = grain(Grains, Plan, Shared, Counts, PerIter, Calibrate, Cores),
    emit(json($D, [{"interrupted", Interrupted}, {"busy_result", <<"0">>}])).

%% Each grain in order; true when a stop request ended them.
grain([], _, _, _, _, _, _) -> false;
grain([Grain | Rest], Plan, Shared, Counts, PerIter, Calibrate, Cores) ->
    Iters = max(1, round(Grain / PerIter)),
    Expected = busy(Iters, false),
    Task = {Plan, Counts, Iters, Expected},
    {Calls, Serial} = serial(Task, Calibrate),
    Stopped = fun() -> atomics:get(Shared, ?STOP) =:= 1 end,
    Warm = fun Warm(Start) ->
                   run_round(Task),
                   Stopped() orelse mono_ns() - Start >= plan(Plan, <<"warmup_ns">>) orelse Warm(Start)
           end,
    Warm(mono_ns()),
    Before = [atomics:get(Counts, I) || I <- [?STARTED, ?COMPLETED, ?WRONG]],
    Duration = plan(Plan, <<"duration_ns">>),
    Measure = fun Measure(Start, Rounds) ->
                      Wall = mono_ns() - Start,
                      case Stopped() of
                          true -> stopped;
                          false when Rounds > 0, Wall >= Duration -> {Rounds, Wall};
                          false -> run_round(Task), Measure(Start, Rounds + 1)
                      end
              end,
    case Stopped() orelse Measure(mono_ns(), 0) of
        {Rounds, Wall} ->
            [Started, Completed, Wrong] = [atomics:get(Counts, I) - B || {I, B} <- lists:zip([?STARTED, ?COMPLETED, ?WRONG], Before)],
            % The task alone again, after its rounds: one of the two may have been disturbed.
            {CallsAfter, SerialAfter} = serial(Task, Calibrate),
            emit(json($P, [{"grain_ns", Grain}, {"iters", Iters}, {"busy_result", integer_to_binary(Expected)},
                           {"serial_tasks", Calls}, {"serial_ns", Serial}, {"serial_after_tasks", CallsAfter},
                           {"serial_after_ns", SerialAfter}, {"rounds", Rounds}, {"tasks", Started},
                           {"completed", Completed}, {"wrong", Wrong}, {"wall_ns", Wall}, {"cores", Cores}])),
            grain(Rest, Plan, Shared, Counts, PerIter, Calibrate, Cores);
        _ -> true
    end.

%% A task's body: the busy work, counted once it has returned.
work({_, Counts, Iters, _}) ->
    Result = busy(Iters, false),
    atomics:add(Counts, ?COMPLETED, 1),
    Result.

check({_, Counts, _, Expected}, Result) ->
    Result =:= Expected orelse atomics:add(Counts, ?WRONG, 1).

start(Task = {_, Counts, _, _}, Body) ->
    atomics:add(Counts, ?STARTED, 1),
    spawn(Body),
    Task.

%% One round of the plan's pattern.
run_round(Task = {Plan, _, _, _}) ->
    Width = plan(Plan, <<"width">>),
    Steps = plan(Plan, <<"steps">>),
    case plan(Plan, <<"pattern">>) of
        <<"trivial">> -> start_and_await(Task, Width * Steps);
        <<"stencil">> -> [start_and_await(Task, Width) || _ <- lists:seq(1, Steps)];
        <<"chain">> ->
            Round = self(),
            [start(Task, fun() -> link_task(Task, Round, Steps, 0, 0) end) || _ <- lists:seq(1, Width)],
            [receive chain_done -> ok end || _ <- lists:seq(1, Width)]
    end.

%% N tasks, each sending its result to the round, which checks each.
start_and_await(Task, N) ->
    Round = self(),
    [start(Task, fun() -> Round ! {result, work(Task)} end) || _ <- lists:seq(1, N)],
    [receive {result, Result} -> check(Task, Result) end || _ <- lists:seq(1, N)].

%% Task K of a chain of Steps: checks what it was handed, works, then hands its result on.
link_task(Task, Round, Steps, K, Handed) ->
    K > 0 andalso check(Task, Handed),
    Result = work(Task),
    case K + 1 < Steps of
        true -> start(Task, fun() -> link_task(Task, Round, Steps, K + 1, Result) end);
        false -> check(Task, Result), Round ! chain_done
    end.

%% busy(iters) one call after another until calibrate_ns has passed, the clock read only between
%% batches: the calls and their time.
serial(Task = {_, _, Iters, _}, Calibrate) ->
    Batch = max(1, 10000 div Iters),
    Loop = fun Loop(Start, Calls) ->
                   [check(Task, busy(Iters, false)) || _ <- lists:seq(1, Batch)],
                   Ns = mono_ns() - Start,
                   case Ns >= Calibrate of
                       true -> {Calls + Batch, Ns};
                       false -> Loop(Start, Calls + Batch)
                   end
           end,
    Loop(mono_ns(), 0).

%% The shortest of three calls of busy(n), for the first n (1024, doubling) whose call takes a
%% quarter of calibrate_ns. BeamAsm compiles the module when it is loaded: no warm-up to wait for.
ns_per_iter(Calibrate) ->
    Timed = fun(N) -> Start = mono_ns(), busy(N, false), mono_ns() - Start end,
    Size = fun Size(N) ->
                   case Timed(N) >= Calibrate div 4 of
                       true -> N;
                       false -> Size(N * 2)
                   end
           end,
    N = Size(1024),
    max(1, lists:min([Timed(N) || _ <- [1, 2, 3]])) / N.
