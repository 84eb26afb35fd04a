#!/usr/bin/env escript
%% flood EVENTS [PROCESSES]: call record() EVENTS times in all from PROCESSES processes as fast
%% as possible, flush, and print the call rate to stderr.
-mode(compile).

main(Args) ->
    {Events, Procs} =
        try [list_to_integer(A) || A <- Args] of
            [E] when E >= 0 -> {E, 1};
            [E, P] when E >= 0, P >= 1 -> {E, P};
            _ -> usage()
        catch
            error:badarg -> usage()
        end,
    load(),
    T0 = erlang:monotonic_time(),
    Parent = self(),
    Workers = [
        spawn_link(fun() ->
            calls(Events div Procs + min(1, max(0, Events rem Procs - I))),
            Parent ! {done, self()}
        end)
     || I <- lists:seq(0, Procs - 1)
    ],
    [
        receive
            {done, W} -> ok
        end
     || W <- Workers
    ],
    taskmeter_record:flush(),
    S = erlang:convert_time_unit(erlang:monotonic_time() - T0, native, microsecond) / 1.0e6,
    io:format(standard_error, "flood: ~b events in ~.3f s = ~b events/s~n", [
        Events, S, round(Events / S)
    ]).

calls(0) ->
    ok;
calls(N) ->
    taskmeter_record:record(),
    calls(N - 1).

usage() ->
    io:format(standard_error, "usage: flood.escript EVENTS [PROCESSES]~n", []),
    halt(2).

%% The client, compiled from its source next to this script.
load() ->
    Dir = filename:dirname(filename:absname(escript:script_name())),
    Src = filename:join([Dir, "src", "taskmeter_record.erl"]),
    {ok, Module, Beam} = compile:file(Src, [binary, report]),
    {module, Module} = code:load_binary(Module, Src, Beam).
