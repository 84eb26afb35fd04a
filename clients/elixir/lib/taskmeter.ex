defmodule TaskMeter do
  @moduledoc """
  The taskmeter record() client for Elixir: report completed units of work to `taskmeter bench`.

  Every function can be called from any process, at any time, with nothing to start first:

      TaskMeter.record()              # one unit of work completed, now
      TaskMeter.start(id)             # ... TaskMeter.complete(id): a unit with its latency

  Every call is a no-op unless `TASKMETER_RECORD` names the collector's socket (set by
  `taskmeter bench`), so instrumented code runs unchanged in production. The functions are
  those of the Erlang module `:taskmeter_record` (`clients/erlang`), compiled into this
  application: the caller takes the time (`CLOCK_MONOTONIC`) and sends the event to one server
  process, started at the first event, which batches the events of every process. The buffer
  is sent when `elixir` or `mix run` reaches the end of its script (a `System.at_exit/1`
  handler) and at `System.stop/0` (or SIGTERM); `System.halt/0,1` cannot be hooked: call
  `flush/0` before it.
  """

  @doc "One unit of work completed, now."
  @spec record() :: :ok
  defdelegate record(), to: :taskmeter_record

  @doc "`n` units of work completed, now (1 <= n < 2^62)."
  @spec record_n(pos_integer()) :: :ok
  defdelegate record_n(n), to: :taskmeter_record

  @doc "The unit `id` (0 <= id < 2^62) started, now."
  @spec start(non_neg_integer()) :: :ok
  defdelegate start(id), to: :taskmeter_record

  @doc "The unit `id` completed, now; counts as one completed unit."
  @spec complete(non_neg_integer()) :: :ok
  defdelegate complete(id), to: :taskmeter_record

  @doc """
  Sends what every process has recorded so far as the stream's final batch and returns once it
  has gone (a later event opens a new stream).
  """
  @spec flush() :: :ok
  defdelegate flush(), to: :taskmeter_record

  @doc """
  True until the measurement window ends (`TASKMETER_RECORD_UNTIL`); always true without
  taskmeter. A long-running body loops while it holds, then ends on its own.
  """
  @spec running?() :: boolean()
  defdelegate running?(), to: :taskmeter_record, as: :running
end
