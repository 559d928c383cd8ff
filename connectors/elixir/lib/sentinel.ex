defmodule EchoMQ.Sentinel do
  @moduledoc """
  Finding the primary behind Sentinel (SPEC §11, R11.1, R11.2, R11.4).

  `discover/2` asks the session's Sentinels in their order, each on a connection of its own
  (the session's transport: TLS for a `rediss://` session, R10.2; `AUTH` as the url's user; no
  `SELECT`, a Sentinel has no database), exactly one question,
  `SENTINEL get-master-addr-by-name <name>`, and closes that connection. A Sentinel that refuses
  the connection, does not answer within `@ask_ms`, answers an error or null is skipped. The node
  a Sentinel names gets a new connection (`AUTH`, then `ROLE` before anything else); it is the
  session's primary only if `ROLE` says `master` (then `SELECT` the session's database), else it
  is closed with nothing more sent on it and the next Sentinel is asked.

  Nothing here remembers an address: every call of `discover/2` starts from the Sentinels
  (R11.3). This module sends through `EchoMQ.Engine`, the seam; it names no key and no raw client.
  """

  alias EchoMQ.{Engine, Router}

  # each Sentinel's share of a request's budget: connect (TLS handshake included), AUTH, the answer
  @ask_ms 1_000
  # the node a Sentinel named, all of it: connect (TLS handshake included), AUTH, ROLE, SELECT
  @check_ms 2_000

  @doc """
  `{:ok, node, pid}`: the primary's `{host, port}` and a connection to it that has passed `ROLE`
  and selected the session's database (not fenced yet). `{:error, message}` when no Sentinel
  named a node that says it is the primary; the message says why, Sentinel by Sentinel.
  """
  def discover(%Router{sentinel: %{name: name, nodes: sentinels}} = s, dl) do
    sentinels
    |> Enum.reduce_while([], fn sentinel, why ->
      if left(dl) < 50 do
        {:halt, ["no time left to ask #{Router.addr(sentinel)} or any after it" | why]}
      else
        case ask(s, sentinel, name, dl) do
          {:ok, node} ->
            case check(s, node, dl) do
              {:ok, pid} -> {:halt, {:ok, node, pid}}
              {:error, m} -> {:cont, [{:stale, "Sentinel #{Router.addr(sentinel)} named #{Router.addr(node)}: #{m}"} | why]}
            end

          {:error, tag, m} ->
            {:cont, [{tag, "Sentinel #{Router.addr(sentinel)}: #{m}"} | why]}
        end
      end
    end)
    |> case do
      {:ok, _node, _pid} = ok -> ok
      why -> {:error, summary(name, Enum.reverse(why))}
    end
  end

  defp summary(name, why) do
    tags = for {tag, _} <- why, do: tag

    head =
      cond do
        tags != [] and Enum.all?(tags, &(&1 == :silent)) -> "no Sentinel answered"
        tags != [] and Enum.all?(tags, &(&1 == :unknown)) -> "no Sentinel knows the name #{inspect(name)}"
        true -> "no Sentinel named a primary for #{inspect(name)}"
      end

    details = Enum.map_join(why, "; ", fn {_, m} -> m; m -> m end)
    "#{head} (#{details})"
  end

  # R11.1, R11.4: one connection, AUTH, the one question, closed.
  defp ask(s, sentinel, name, dl) do
    sdl = min(dl, now() + @ask_ms)

    case Engine.open_conn(sentinel, s.auth, 0, s.tls, sdl) do
      {:ok, pid} ->
        reply = Engine.raw_pipeline(pid, [["SENTINEL", "get-master-addr-by-name", name]], max(left(sdl), 1))
        Engine.close_conn(pid)

        case reply do
          {:ok, [[host, port]]} when is_binary(host) and host != "" ->
            case port_of(port) do
              {:ok, p} -> {:ok, {host, p}}
              :error -> {:error, :answered, "answered a bad address #{inspect([host, port])}"}
            end

          {:ok, [nil]} ->
            {:error, :unknown, "does not know the name #{inspect(name)}"}

          {:ok, [{:err, m}]} ->
            {:error, :answered, m}

          {:ok, [other]} ->
            {:error, :answered, "unexpected answer #{inspect(other)}"}

          {:error, reason} ->
            {:error, :silent, "no answer within #{@ask_ms} ms (#{Engine.describe_reason(reason)})"}
        end

      # refused, unreachable, or no answer to AUTH in time; an AUTH error reply is an answer
      {:error, m} ->
        tag = if m =~ ~r/cannot connect|connection failed/, do: :silent, else: :answered
        {:error, tag, m}
    end
  end

  # R11.2: ROLE before anything else but AUTH; SELECT only on the primary.
  defp check(s, node, dl) do
    cdl = min(dl, now() + @check_ms)

    with {:ok, pid} <- Engine.open_conn(node, s.auth, 0, s.tls, cdl) do
      case Engine.raw_pipeline(pid, [["ROLE"]], max(left(cdl), 1)) do
        {:ok, [["master" | _]]} ->
          select(pid, node, s.db, cdl)

        {:ok, [[role | _]]} ->
          Engine.close_conn(pid)
          {:error, "its ROLE is #{inspect(role)}, not master"}

        {:ok, [{:err, m}]} ->
          Engine.close_conn(pid)
          {:error, "ROLE: #{m}"}

        {:ok, [other]} ->
          Engine.close_conn(pid)
          {:error, "ROLE: unexpected reply #{inspect(other)}"}

        {:error, reason} ->
          {:error, "ROLE: connection failed (#{Engine.describe_reason(reason)})"}
      end
    end
  end

  defp select(pid, _node, 0, _dl), do: {:ok, pid}

  defp select(pid, node, db, dl) do
    case Engine.raw_pipeline(pid, [["SELECT", db]], max(left(dl), 1)) do
      {:ok, ["OK"]} ->
        {:ok, pid}

      {:ok, [other]} ->
        Engine.close_conn(pid)
        {:error, "SELECT #{db} on #{Router.addr(node)}: #{inspect(other)}"}

      {:error, reason} ->
        {:error, "SELECT #{db} on #{Router.addr(node)}: connection failed (#{Engine.describe_reason(reason)})"}
    end
  end

  defp port_of(p) when is_integer(p) and p in 1..65535, do: {:ok, p}

  defp port_of(p) when is_binary(p) do
    case Integer.parse(p) do
      {n, ""} when n in 1..65535 -> {:ok, n}
      _ -> :error
    end
  end

  defp port_of(_), do: :error

  defp now, do: System.monotonic_time(:millisecond)
  defp left(dl), do: dl - now()
end
