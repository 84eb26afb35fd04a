# flood EVENTS [PROCESSES]: call TaskMeter.record() EVENTS times in all from PROCESSES processes
# as fast as possible, flush, and print the call rate to stderr.
defmodule Flood do
  def calls(0), do: :ok

  def calls(n) do
    TaskMeter.record()
    calls(n - 1)
  end

  def main(argv) do
    {events, procs} =
      case Enum.map(argv, &Integer.parse/1) do
        [{e, ""}] when e >= 0 -> {e, 1}
        [{e, ""}, {p, ""}] when e >= 0 and p >= 1 -> {e, p}
        _ -> usage()
      end

    t0 = System.monotonic_time()

    0..(procs - 1)
    |> Enum.map(fn i ->
      Task.async(fn -> calls(div(events, procs) + min(1, max(0, rem(events, procs) - i))) end)
    end)
    |> Task.await_many(:infinity)

    TaskMeter.flush()
    s = System.convert_time_unit(System.monotonic_time() - t0, :native, :microsecond) / 1.0e6
    seconds = :erlang.float_to_binary(s, decimals: 3)
    IO.puts(:stderr, "flood: #{events} events in #{seconds} s = #{round(events / s)} events/s")
  end

  defp usage do
    IO.puts(:stderr, "usage: mix run flood.exs EVENTS [PROCESSES]")
    System.halt(2)
  end
end

Flood.main(System.argv())
