defmodule EchoMQ.Wire do
  @moduledoc """
  Wire protocol v1 (SPEC §5): one JSON request per line, exactly one response per request, in
  order, echoing `seq`. `handle_line/2` is pure apart from the engine calls it makes, so the unit
  tests drive it without a process or an engine.
  """

  alias EchoMQ.{Bundle, Engine, JSON, Validate}
  import Validate, only: [int: 4, ms: 2, string: 2, queue: 1, job_id: 1]

  @name "echomq-elixir"
  @version "0.1.0"
  # Per-request budget: the harness allows 10 s (plus 250 us per command of a batch or a probe).
  @base_ms 8_500

  defstruct bundle: nil, sessions: %{}

  def new(bundle), do: %__MODULE__{bundle: bundle}

  @doc "Returns `{:reply, iodata, state}` or `{:stop, state}`."
  def handle_line(line, state) do
    case JSON.decode(line) do
      {:ok, %{} = req} ->
        seq = Map.get(req, "seq")

        case Map.get(req, "cmd") do
          "stop" ->
            {:stop, state}

          cmd when is_binary(cmd) ->
            {result, state} = dispatch(cmd, req, state)
            {:reply, encode(seq, result), state}

          nil ->
            {:reply, encode(seq, {:error, :invalid, "missing field cmd"}), state}

          _ ->
            {:reply, encode(seq, {:error, :invalid, "cmd must be a string"}), state}
        end

      {:ok, _} ->
        {:reply, encode(nil, {:error, :invalid, "a request must be a JSON object"}), state}

      {:error, why} ->
        {:reply, encode(guess_seq(line), {:error, :invalid, "not JSON: #{why}"}), state}
    end
  end

  defp guess_seq(line) do
    case Regex.run(~r/"seq"\s*:\s*(-?[0-9]+)[\s,}]/, line) do
      [_, n] -> String.to_integer(n)
      _ -> nil
    end
  end

  # R5.11: a response line is at most 16 MiB, its newline not counted.
  @max_line 16 * 1024 * 1024
  def max_line, do: @max_line

  # One over the limit is kind internal naming its size (R5.6: the engine did answer, so it is
  # not engine; the wire cannot carry it).
  def encode(seq, {:ok, v}) do
    line = JSON.encode(%{"seq" => seq, "ok" => v})
    size = IO.iodata_length(line)

    if size > @max_line do
      encode(seq, {:error, :internal, "the reply would be a #{size}-byte line, over the wire's #{@max_line}-byte limit (R5.11)"})
    else
      [line, ?\n]
    end
  end

  def encode(seq, {:error, kind, msg}),
    do: [JSON.encode(%{"seq" => seq, "error" => %{"kind" => kind, "message" => msg}}), ?\n]

  defp dispatch(cmd, req, state) do
    do_dispatch(cmd, req, state)
  rescue
    e -> {{:error, :internal, "#{Exception.message(e)} (a bug in the connector)"}, state}
  catch
    {:invalid, msg} -> {{:error, :invalid, msg}, state}
    kind, reason -> {{:error, :internal, "#{kind}: #{inspect(reason)} (a bug in the connector)"}, state}
  end

  # SPEC §7: any protocol but the integer 1 (the string "1" included) is unsupported
  defp do_dispatch("hello", req, state) do
    case Map.fetch(req, "protocol") do
      :error ->
        Validate.fail("missing field protocol")

      {:ok, 1} ->
        b = state.bundle

        {{:ok, %{name: @name, version: @version, language: "elixir", bundle: b.version, scripts: Bundle.shas(b)}},
         state}

      {:ok, p} ->
        {{:error, :unsupported, "wire protocol #{Validate.describe(p)} (this connector speaks 1)"}, state}
    end
  end

  defp do_dispatch("connect", req, state) do
    name = Validate.session_name(req)
    url = Validate.url(Map.get(req, "url") || Validate.fail("missing field url"))
    cluster = Validate.optional_bool(req, "cluster")
    # R8.5: a cluster url may name any database; whether the engine has it (`cluster-databases`,
    # the user's `db=` ACL) is the engine's to say, when the seed's connection sends `SELECT`
    # R11.1: the Sentinels to ask and the name they know the primary by (nil on other engines)
    sentinel = Validate.sentinel(req, cluster)
    # R10.1: read and checked here, before the old session is closed or anything is dialled
    cacerts = Validate.ca_file(req, url)

    # connecting afresh closes the old connection first (SPEC §7)
    state =
      case Map.pop(state.sessions, name) do
        {nil, _} ->
          state

        {old, rest} ->
          Engine.disconnect(old)
          %{state | sessions: rest}
      end

    case Engine.connect(state.bundle, name, url, cluster, sentinel, cacerts, deadline(0)) do
      {:ok, s} -> {{:ok, %{}}, %{state | sessions: Map.put(state.sessions, name, s)}}
      {:error, k, m} -> {{:error, k, m}, state}
    end
  end

  defp do_dispatch("disconnect", req, state) do
    s = session(req, state)
    Engine.disconnect(s)
    {{:ok, %{}}, %{state | sessions: Map.delete(state.sessions, s.name)}}
  end

  defp do_dispatch("enqueue", req, state) do
    {q, p, d} = {queue(req), string(req, "payload"), ms(req, "delay_ms")}
    verb(req, state, 0, &Engine.enqueue(&1, q, p, d, &2))
  end

  defp do_dispatch("claim", req, state) do
    {q, l} = {queue(req), ms(req, "lease_ms")}
    verb(req, state, 0, &Engine.claim(&1, q, l, &2))
  end

  defp do_dispatch("complete", req, state) do
    {q, id, a} = {queue(req), job_id(req), int(req, "attempts", 0, Validate.max_i32())}
    verb(req, state, 0, &Engine.complete(&1, q, id, a, &2))
  end

  defp do_dispatch("retry", req, state) do
    q = queue(req)
    id = job_id(req)
    a = int(req, "attempts", 0, Validate.max_i32())
    b = ms(req, "backoff_ms")
    m = int(req, "max_attempts", 1, Validate.max_i32())
    verb(req, state, 0, &Engine.retry(&1, q, id, a, b, m, &2))
  end

  defp do_dispatch("promote", req, state) do
    {q, l} = {queue(req), int(req, "limit", 0, Validate.max_i32())}
    verb(req, state, 0, &Engine.promote(&1, q, l, &2))
  end

  defp do_dispatch("reap", req, state) do
    q = queue(req)
    m = int(req, "max_attempts", 1, Validate.max_i32())
    l = int(req, "limit", 0, Validate.max_i32())
    verb(req, state, 0, &Engine.reap(&1, q, m, l, &2))
  end

  defp do_dispatch("browse", req, state) do
    q = queue(req)
    o = int(req, "offset", 0, Validate.max_i32())
    l = int(req, "limit", 0, Validate.max_i32())
    verb(req, state, 0, &Engine.browse(&1, q, o, l, &2))
  end

  defp do_dispatch("pending_size", req, state) do
    q = queue(req)
    verb(req, state, 0, &Engine.pending_size(&1, q, &2))
  end

  defp do_dispatch("pipeline_probe", req, state) do
    {k, n} = {Validate.probe_key(req), int(req, "n", 1, 1_000_000)}
    verb(req, state, n, &Engine.pipeline_probe(&1, k, n, &2))
  end

  defp do_dispatch("batch", req, state) do
    q = queue(req)
    n = int(req, "n", 1, 10_000_000)
    depth = int(req, "depth", 1, 100_000)
    payload = string(req, "payload")
    qs = Validate.batch_queues(req, q)
    verb(req, state, n, &Engine.batch(&1, qs, n, depth, payload, &2))
  end

  defp do_dispatch(cmd, _req, state),
    do: {{:error, :unsupported, "unknown cmd #{inspect(cmd)}"}, state}

  # Every argument is checked before the session (R4.8), and nothing is sent before both.
  defp verb(req, state, n, fun) do
    s = session(req, state)

    result =
      case fun.(s, deadline(n)) do
        {:ok, v, s} -> {{:ok, v}, put(state, s)}
        {:error, k, m, s} -> {{:error, k, m}, put(state, s)}
      end

    # a large pipeline grew the heap; give it back before the next request
    if n > 50_000, do: :erlang.garbage_collect()
    result
  end

  defp put(state, s), do: %{state | sessions: Map.put(state.sessions, s.name, s)}

  defp session(req, state) do
    name = Validate.session_name(req)

    case state.sessions do
      %{^name => s} -> s
      _ -> Validate.fail("unknown session #{inspect(name)}")
    end
  end

  defp deadline(n), do: System.monotonic_time(:millisecond) + @base_ms + div(n, 4)
end
