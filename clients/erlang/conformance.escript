#!/usr/bin/env escript
%% The contract of clients/README.md: 10 units, 2 latencies, 1 unknown id, 1 duplicate,
%% 1 never completed. Sends nothing without TASKMETER_RECORD.
-mode(compile).

main(_) ->
    load(),
    taskmeter_record:record(),
    taskmeter_record:record(),
    taskmeter_record:record(),
    taskmeter_record:record_n(5),
    taskmeter_record:start(1),
    taskmeter_record:start(2),
    taskmeter_record:complete(2),
    taskmeter_record:complete(1),
    % never started
    taskmeter_record:complete(99),
    % completed twice
    taskmeter_record:complete(1),
    % never completed
    taskmeter_record:start(3),
    % an escript ends with erlang:halt/1, which no exit hook sees
    taskmeter_record:flush().

%% The client as installed, where it is on the code path (a rebar3 or Mix build in ERL_LIBS: the
%% test of the installs runs a copy of this script so), or else compiled from src/ beside this
%% script.
load() ->
    case code:ensure_loaded(taskmeter_record) of
        {module, taskmeter_record} ->
            ok;
        {error, _} ->
            Dir = filename:dirname(filename:absname(escript:script_name())),
            Src = filename:join([Dir, "src", "taskmeter_record.erl"]),
            {ok, Module, Beam} = compile:file(Src, [binary, report]),
            {module, Module} = code:load_binary(Module, Src, Beam)
    end.
