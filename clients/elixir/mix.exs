defmodule TaskMeter.MixProject do
  use Mix.Project

  # No dependencies (Hex is not needed): the Erlang client, ../erlang/src/taskmeter_record.erl, is
  # compiled into this application beside TaskMeter, which wraps it.
  def project do
    [
      app: :taskmeter,
      version: "0.1.0",
      elixir: "~> 1.14",
      erlc_paths: ["../erlang/src"],
      deps: []
    ]
  end

  def application do
    [extra_applications: []]
  end
end
