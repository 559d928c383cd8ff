defmodule EchoMQ.Main do
  @moduledoc """
  The process: verify the bundle (exit 2 with one stderr line on a mismatch, R2.1), then serve
  wire v1 on stdin/stdout until `stop` or end of input (exit 0, no response).
  Started by the launcher as `erl ... -run Elixir.EchoMQ.Main main -extra [--bundle DIR]`.
  """

  alias EchoMQ.{Bundle, Wire}

  def main, do: main(:init.get_plain_arguments())

  def main(args) do
    argv = Enum.map(args, &List.to_string/1)
    # the raw client's connections are linked to this process: their exits must not end it.
    Process.flag(:trap_exit, true)
    # SPEC §5 (R5.1): stdout is the wire. Erlang's default log handler writes to standard_io,
    # which under `erl -noshell` is stdout: one log event (the raw client's connection report, a crash
    # report) would be a line the harness never asked for. Its `type` cannot change in place.
    _ = :logger.remove_handler(:default)
    :ok = :logger.add_handler(:default, :logger_std_h, %{config: %{type: :standard_error}})
    # under `erl -noshell` standard_io starts in list mode: ask for binaries (raw bytes)
    :io.setopts(:standard_io, binary: true, encoding: :latin1)
    dir = Bundle.locate(argv, System.get_env("EMQ_ELIXIR_DEFAULT_BUNDLE") || "bundle")

    case Bundle.load(dir) do
      {:ok, bundle} ->
        loop(Wire.new(bundle))

      {:error, why} ->
        IO.puts(:stderr, "echomq-elixir: bundle #{dir}: #{why}")
        System.halt(2)
    end
  end

  defp loop(state) do
    drain_exits()

    case IO.binread(:stdio, :line) do
      line when is_binary(line) or is_list(line) ->
        case line |> IO.iodata_to_binary() |> String.trim() do
          "" ->
            loop(state)

          req ->
            case Wire.handle_line(req, state) do
              {:reply, out, state} ->
                IO.binwrite(:stdio, out)
                loop(state)

              {:stop, _state} ->
                System.halt(0)
            end
        end

      _eof_or_error ->
        System.halt(0)
    end
  end

  defp drain_exits do
    receive do
      {:EXIT, _pid, _reason} -> drain_exits()
    after
      0 -> :ok
    end
  end
end
