# sleeper MS: while running?(), a process sleeps MS milliseconds then records one unit; the
# script waits for it and loops. `mix run examples/sleeper.exs 100` reports about 9.9 units/s.
defmodule Sleeper do
  def loop(ms) do
    if TaskMeter.running?() do
      Task.async(fn ->
        Process.sleep(ms)
        TaskMeter.record()
      end)
      |> Task.await(:infinity)

      loop(ms)
    end
  end
end

case System.argv() do
  [ms] ->
    Sleeper.loop(String.to_integer(ms))
    TaskMeter.flush()

  _ ->
    IO.puts(:stderr, "usage: mix run examples/sleeper.exs MS")
    System.halt(2)
end
