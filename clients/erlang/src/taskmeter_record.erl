%% taskmeter record() client for Erlang/OTP: report completed units of work to `taskmeter bench`.
%% Standard library only (OTP 23 or later, for the socket module; tested on OTP 25). Every call is
%% a no-op unless TASKMETER_RECORD names the collector's SOCK_DGRAM socket; the wire format is in
%% clients/README.md.
%%
%%     taskmeter_record:record(),         % one unit of work completed, now
%%     taskmeter_record:start(7), ..., taskmeter_record:complete(7),
%%     taskmeter_record:flush()           % before erlang:halt/0,1 or the end of an escript
%%
%% Any process may call it. The caller reads CLOCK_MONOTONIC (the collector's clock, not Erlang
%% monotonic time: see monotonic_ns/1) and sends the event, as a message, to one registered
%% server, which batches the events of every process of the node as one stream (a new one after
%% each final batch). The server starts at the first event, under kernel_safe_sup (as OTP's own
%% timer server does), so init:stop/0 (System.stop/0, and the SIGTERM that taskmeter sends a body
%% still running after the drain) stops it after the applications, and it sends its final batch
%% then. Under Elixir's CLI (elixir, mix run) it also flushes at the end of the script, in a
%% System.at_exit/1 handler. erlang:halt/0,1 (System.halt/0,1, and the end of an escript) runs no
%% code: call flush/0 before it.
-module(taskmeter_record).
-behaviour(gen_server).

-export([record/0, record_n/1, start/1, complete/1, flush/0, running/0]).
-export([start_link/0]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

%% events per batch (the wire allows 4096)
-define(MAX_EVENTS, 2048).
%% a batch goes this long after its first event reached the server, if not full before
-define(MAX_AGE_MS, 100).
%% a send never blocks longer; then the batch is dropped and counted
-define(SEND_TIMEOUT_MS, 10).
%% a final batch waits this long for a full queue (no later batch carries its count)
-define(FINAL_PATIENCE_MS, 1000).
%% events sent to the server and not yet taken (about 120 bytes each); callers that find this
%% many drop their event and count it, rather than grow the server's mailbox without bound
-define(MAX_QUEUED, 1000000).
%% events the server takes from its mailbox before it looks at calls again
-define(DRAIN, 8192).
%% ids and n live in bits 0-61, the kind in bits 62-63
-define(LIMIT, (1 bsl 62)).
-define(START, (1 bsl 62)).
-define(COMPLETE, (2 bsl 62)).
-define(FINAL, 1).
%% The persistent term {Mode, Until, Path, Clock, Counts}. Mode: on, off, or closed once the
%% server has sent its final batch at shutdown (each later event then goes at once, as the final
%% batch of a new stream). Clock: how to read CLOCK_MONOTONIC (monotonic_ns/1). Counts: atomics,
%% the events in the server's mailbox (?QUEUED) and those callers dropped since the server last
%% took their count (?DROPPED).
-define(CONFIG, ?MODULE).
-define(QUEUED, 1).
-define(DROPPED, 2).

-record(st, {
    path :: string(),
    counts :: atomics:atomics_ref() | undefined,
    sock = undefined :: socket:socket() | undefined,
    pid :: non_neg_integer(),
    stream :: non_neg_integer(),
    seq = 0 :: non_neg_integer(),
    dropped = 0 :: non_neg_integer(),
    %% the events as they came, {?MODULE, T, Word}, the latest first
    buf = [] :: [{?MODULE, integer(), non_neg_integer()}],
    count = 0 :: non_neg_integer(),
    timer = undefined :: reference() | undefined
}).

%% ---- The API: any process --------------------------------------------------------------------

%% @doc One unit of work completed, now.
-spec record() -> ok.
record() -> event(1).

%% @doc N units of work completed, now (1 =< N < 2^62).
-spec record_n(pos_integer()) -> ok.
record_n(N) when is_integer(N), N > 0, N < ?LIMIT -> event(N).

%% @doc The unit Id (0 =< Id < 2^62) started, now.
-spec start(non_neg_integer()) -> ok.
start(Id) when is_integer(Id), Id >= 0, Id < ?LIMIT -> event(?START bor Id).

%% @doc The unit Id completed, now; counts as one completed unit.
-spec complete(non_neg_integer()) -> ok.
complete(Id) when is_integer(Id), Id >= 0, Id < ?LIMIT -> event(?COMPLETE bor Id).

%% @doc Sends what every process has recorded so far as the stream's final batch, and returns
%% when it has gone (or was counted as dropped); a later event opens a new stream. Needed before
%% erlang:halt/0,1 and at the end of an escript, which no exit hook sees.
-spec flush() -> ok.
flush() ->
    case persistent_term:get(?CONFIG, undefined) of
        {on, _, _, _, _} ->
            try
                gen_server:call(?MODULE, flush, infinity)
            catch
                exit:_ -> ok  % no server (nothing recorded), or it is stopping and sends itself
            end;
        _ ->
            ok
    end.

%% @doc True until the measurement window ends (TASKMETER_RECORD_UNTIL, CLOCK_MONOTONIC ns);
%% always true without it.
-spec running() -> boolean().
running() ->
    case config() of
        {_, infinity, _, _, _} -> true;
        {_, Until, _, Clock, _} -> monotonic_ns(Clock) < Until
    end.

event(Word) ->
    case persistent_term:get(?CONFIG, undefined) of
        {on, _, _, Clock, Counts} ->
            T = monotonic_ns(Clock),
            case atomics:add_get(Counts, ?QUEUED, 1) of
                Queued when Queued =< ?MAX_QUEUED ->
                    try
                        ?MODULE ! {?MODULE, T, Word},
                        ok
                    catch
                        error:badarg -> unsent(T, Word)  % no server yet (or it just stopped)
                    end;
                _ ->
                    % The server is that far behind: count the event as dropped.
                    atomics:sub(Counts, ?QUEUED, 1),
                    atomics:add(Counts, ?DROPPED, 1)
            end;
        {off, _, _, _, _} ->
            ok;
        {closed, _, Path, Clock, _} ->
            alone(Path, monotonic_ns(Clock), Word);
        undefined ->
            % The first call: the time before the server starts (a few milliseconds at most).
            T = monotonic_ns(os),
            _ = config(),
            unsent(T, Word)
    end.

%% The server is not registered: start it and send again; if it cannot start (the node is
%% shutting down), send the event on its own. (A new server starts its count of queued events
%% afresh.)
unsent(T, Word) ->
    case config() of
        {on, _, Path, _, _} ->
            ensure_server(),
            try
                ?MODULE ! {?MODULE, T, Word},
                ok
            catch
                error:badarg -> alone(Path, T, Word)
            end;
        {off, _, _, _, _} ->
            ok;
        {closed, _, Path, _, _} ->
            alone(Path, T, Word)
    end.

%% One event as the final batch of a stream of its own (after the server's final batch).
alone(Path, T, Word) ->
    St = add({?MODULE, T, Word}, new_state(Path, undefined)),
    close(final(St)),
    ok.

%% The configuration, read from the environment once. With TASKMETER_RECORD set, the server's
%% init/1 makes it (once: the server's registration orders racing first calls), so that every
%% caller shares its counts.
config() ->
    case persistent_term:get(?CONFIG, undefined) of
        undefined ->
            case os:getenv("TASKMETER_RECORD", "") of
                "" ->
                    Config = {off, until(), undefined, clock(), undefined},
                    persistent_term:put(?CONFIG, Config),
                    Config;
                _ ->
                    ensure_server(),
                    case persistent_term:get(?CONFIG, undefined) of
                        undefined -> make_config();  % no server: events will go on their own
                        Config -> Config
                    end
            end;
        Config ->
            Config
    end.

make_config() ->
    Config = {on, until(), os:getenv("TASKMETER_RECORD"), clock(), atomics:new(2, [])},
    persistent_term:put(?CONFIG, Config),
    Config.

until() ->
    try
        list_to_integer(os:getenv("TASKMETER_RECORD_UNTIL"))
    catch
        error:badarg -> infinity
    end.

%% CLOCK_MONOTONIC in nanoseconds. os:perf_counter/0 reads it (about 30 ns) where ERTS reads its
%% performance counter with clock_gettime(CLOCK_MONOTONIC), as on Linux by default: clock/0
%% checks it once against the OS monotonic clock of ERTS (which names its clock id), since ERTS
%% reads the TSC instead on CPUs that report a reliable one. Otherwise the time comes from that
%% OS clock itself (erlang:system_info(os_monotonic_time_source), about 0.8 us). Erlang monotonic
%% time would not do: it is the OS clock plus an offset, and time correction may change its rate
%% (by up to 1% in the no_time_warp mode, OTP 25's default).
monotonic_ns(perf) ->
    os:perf_counter();
monotonic_ns(os) ->
    {time, T} = lists:keyfind(time, 1, erlang:system_info(os_monotonic_time_source)),
    erlang:convert_time_unit(T, native, nanosecond).

%% perf if the performance counter counts nanoseconds and brackets a reading of the OS clock of
%% ERTS, which must be CLOCK_MONOTONIC (else os, the best there is).
clock() ->
    Source = erlang:system_info(os_monotonic_time_source),
    Before = os:perf_counter(),
    Os = monotonic_ns(os),
    After = os:perf_counter(),
    case
        lists:keyfind(clock_id, 1, Source) =:= {clock_id, 'CLOCK_MONOTONIC'} andalso
            erlang:convert_time_unit(1, second, perf_counter) =:= 1000000000 andalso
            Before =< Os andalso Os =< After
    of
        true -> perf;
        false -> os
    end.

ensure_server() ->
    Spec = #{
        id => ?MODULE,
        start => {?MODULE, start_link, []},
        restart => temporary,
        shutdown => 2 * ?FINAL_PATIENCE_MS + 1000,
        type => worker,
        modules => [?MODULE]
    },
    try
        case whereis(kernel_safe_sup) of
            undefined -> gen_server:start({local, ?MODULE}, ?MODULE, [], []);
            _ -> supervisor:start_child(kernel_safe_sup, Spec)
        end
    catch
        exit:_ -> ok  % kernel_safe_sup is stopping: the node is shutting down
    end,
    ok.

%% ---- The server ------------------------------------------------------------------------------

%% @private
start_link() -> gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

%% @private
init([]) ->
    process_flag(trap_exit, true),  % so that the supervisor's shutdown runs terminate/2
    % Many senders, one receiver: a mailbox outside the heap takes messages without its lock,
    % and the server's garbage collections never copy it.
    process_flag(message_queue_data, off_heap),
    {on, _, Path, _, Counts} =
        case persistent_term:get(?CONFIG, undefined) of
            undefined ->
                make_config();
            Config ->
                atomics:put(element(5, Config), ?QUEUED, 0),  % what a previous server left
                Config
        end,
    case erlang:function_exported('Elixir.System', at_exit, 1) of
        true -> 'Elixir.System':at_exit(fun(_Status) -> flush() end);
        false -> ok
    end,
    {ok, new_state(Path, Counts)}.

%% @private
handle_call(flush, _From, St) ->
    {message_queue_len, N} = process_info(self(), message_queue_len),
    {reply, ok, final(drain(St, N))};
handle_call(_Request, _From, St) ->
    {reply, {error, unknown_call}, St}.

%% @private
handle_cast(_Request, St) -> {noreply, St}.

%% @private
handle_info({?MODULE, _, _} = Event, St) ->
    {noreply, arm(drain(add(Event, St), ?DRAIN))};
handle_info({timeout, Timer, age}, #st{timer = Timer} = St) ->
    {noreply, send_batch(0, St#st{timer = undefined})};
handle_info(_Other, St) ->
    {noreply, St}.

%% @private
%% The node is shutting down (init:stop/0): later events go on their own; the final batch takes
%% every event in the mailbox, and a second one the few sent in between.
terminate(_Reason, St) ->
    {_, Until, Path, Clock, Counts} = persistent_term:get(?CONFIG),
    persistent_term:put(?CONFIG, {closed, Until, Path, Clock, Counts}),
    St1 = final(drain(St, infinity)),
    close(final(drain(St1, infinity))).

%% A batch that is not full goes MAX_AGE_MS after its first event (a timer for each batch).
arm(#st{count = 0} = St) ->
    St;
arm(#st{timer = undefined} = St) ->
    St#st{timer = erlang:start_timer(?MAX_AGE_MS, self(), age)};
arm(St) ->
    St.

%% Takes up to N more events from the mailbox, without waiting, and counts them as taken (with
%% the one that handle_info/2 took).
drain(#st{counts = Counts} = St, N) ->
    {St1, Taken} = drain(St, N, 1),
    atomics:sub(Counts, ?QUEUED, Taken),
    St1.

drain(St, 0, Taken) ->
    {St, Taken};
drain(St, N, Taken) ->
    receive
        {?MODULE, _, _} = Event -> drain(add(Event, St), dec(N), Taken + 1)
    after 0 -> {St, Taken}
    end.

dec(infinity) -> infinity;
dec(N) -> N - 1.

%% ---- Batches ---------------------------------------------------------------------------------

new_state(Path, Counts) ->
    #st{
        path = Path,
        counts = Counts,
        pid = list_to_integer(os:getpid()),
        stream = new_stream()
    }.

%% Stream ids unique within the node: a new server, or an event sent on its own, never reuses one.
new_stream() -> erlang:unique_integer([positive, monotonic]) band 16#FFFFFFFF.

add(Event, #st{buf = Buf, count = Count} = St) ->
    St1 = St#st{buf = [Event | Buf], count = Count + 1},
    case Count + 1 of
        ?MAX_EVENTS -> send_batch(0, St1);
        _ -> St1
    end.

%% What is buffered as the stream's final batch (if the stream has anything to end), then a new
%% stream.
final(#st{count = 0, seq = 0, dropped = 0, counts = Counts} = St) ->
    case Counts =/= undefined andalso atomics:get(Counts, ?DROPPED) > 0 of
        true -> final_batch(St);
        false -> St
    end;
final(St) ->
    final_batch(St).

final_batch(St) ->
    (send_batch(?FINAL, St))#st{stream = new_stream(), seq = 0}.

%% The buffer as one batch, with the count of every event dropped since the last one (here, or
%% by callers while the server was far behind). A final batch waits for a full queue up to
%% FINAL_PATIENCE_MS in all, and if its events still cannot go, a header-only final batch counts
%% them as dropped.
send_batch(Flags, #st{buf = Buf, count = Count, timer = Timer, counts = Counts} = St) ->
    _ = Timer =:= undefined orelse erlang:cancel_timer(Timer, [{async, true}, {info, false}]),
    Dropped =
        case Counts of
            undefined -> St#st.dropped;
            _ -> St#st.dropped + atomics:exchange(Counts, ?DROPPED, 0)
        end,
    Empty = St#st{buf = [], count = 0, timer = undefined, dropped = Dropped},
    % Latest first: the collector sorts the events of a batch.
    Body = <<<<T:64/little, Word:64/little>> || {_, T, Word} <- Buf>>,
    case Flags band ?FINAL of
        0 ->
            element(2, send(Flags, Count, Body, ?SEND_TIMEOUT_MS, Empty));
        _ ->
            Deadline = erlang:monotonic_time(millisecond) + ?FINAL_PATIENCE_MS,
            case send(Flags, Count, Body, ?FINAL_PATIENCE_MS, Empty) of
                {true, St1} ->
                    St1;
                {false, St1} ->
                    Left = max(Deadline - erlang:monotonic_time(millisecond), ?SEND_TIMEOUT_MS),
                    element(2, send(Flags, 0, <<>>, Left, St1))
            end
    end.

%% One datagram; {true, St} if it went, else its events are counted as dropped.
send(Flags, Count, Body, Timeout, #st{seq = Seq, dropped = Dropped} = St) ->
    Carried = min(Dropped, 16#FFFFFFFF),
    Header =
        <<"TMR1", Flags:32/little, (St#st.pid):32/little, (St#st.stream):32/little,
            Seq:32/little, Carried:32/little, Count:32/little, 0:32/little>>,
    case connect(St) of
        {ok, Sock} ->
            % A connected datagram socket waits (up to the timeout) while the collector's queue
            % is full, and fails at once when the collector is gone.
            case socket:send(Sock, [Header, Body], Timeout) of
                ok ->
                    Seq1 = (Seq + 1) band 16#FFFFFFFF,
                    {true, St#st{sock = Sock, seq = Seq1, dropped = Dropped - Carried}};
                {error, Reason} when Reason =:= timeout; element(1, Reason) =:= timeout ->
                    {false, St#st{sock = Sock, dropped = Dropped + Count}};
                {error, _} ->
                    % Collector gone (ECONNREFUSED, ENOENT) or a batch it refuses: reconnect next.
                    _ = socket:close(Sock),
                    {false, St#st{sock = undefined, dropped = Dropped + Count}}
            end;
        error ->
            {false, St#st{dropped = Dropped + Count}}
    end.

connect(#st{sock = undefined, path = Path}) ->
    case socket:open(local, dgram, default) of
        {ok, Sock} ->
            case socket:connect(Sock, #{family => local, path => Path}) of
                ok ->
                    {ok, Sock};
                {error, _} ->
                    _ = socket:close(Sock),
                    error
            end;
        {error, _} ->
            error
    end;
connect(#st{sock = Sock}) ->
    {ok, Sock}.

close(#st{sock = undefined}) ->
    ok;
close(#st{sock = Sock}) ->
    _ = socket:close(Sock),
    ok.
