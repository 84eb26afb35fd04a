#!/usr/bin/env escript
%% sleeper MS: while running(), a process sleeps MS milliseconds then records one unit; the
%% script waits for it and loops. `escript examples/sleeper.escript 100` reports about 9.9 units/s.
-mode(compile).

main([Arg]) ->
    Ms =
        try list_to_integer(Arg) of
            N when N >= 0 -> N;
            _ -> usage()
        catch
            error:badarg -> usage()
        end,
    load(),
    loop(Ms),
    % an escript ends with erlang:halt/1, which no exit hook sees
    taskmeter_record:flush();
main(_) ->
    usage().

loop(Ms) ->
    case taskmeter_record:running() of
        true ->
            {Pid, Ref} = spawn_monitor(fun() ->
                timer:sleep(Ms),
                taskmeter_record:record()
            end),
            receive
                {'DOWN', Ref, process, Pid, _} -> loop(Ms)
            end;
        false ->
            ok
    end.

usage() ->
    io:format(standard_error, "usage: escript sleeper.escript MS~n", []),
    halt(2).

%% The client, compiled from its source in the folder above.
load() ->
    Dir = filename:dirname(filename:dirname(filename:absname(escript:script_name()))),
    Src = filename:join([Dir, "src", "taskmeter_record.erl"]),
    {ok, Module, Beam} = compile:file(Src, [binary, report]),
    {module, Module} = code:load_binary(Module, Src, Beam).
