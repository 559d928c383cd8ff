defmodule EchoMQ.Router do
  @moduledoc """
  A session's connections and where each command goes (SPEC §4, §8).

  A session is one connection (single engine) or one connection per primary (cluster, R8.1).
  `run/4` sends a list of commands, each tagged with its slot, as one pipeline per node, and
  returns their replies in order. On a cluster it follows `MOVED` (refresh the slot map, send to
  the named node) and `ASK` (`ASKING` + the command on the named node), and retries `TRYAGAIN` /
  `CLUSTERDOWN`: each of those says the command did not run. A `NOSCRIPT` is answered by one
  `SCRIPT LOAD` on the node that said it, then the `EVALSHA` again there (R4.9, R8.2); a second
  `NOSCRIPT` for the same call is an error reply, not a loop.

  A failed connection is never retried here (R4.16): the call fails with kind `engine`, the
  connection is dropped, and the next verb opens a new one, which reads the fence before any
  command of a verb is sent on it (R3.1): `conns` marks each connection `fenced` only after a
  fence read that followed its opening.

  Behind Sentinel (SPEC §11) the session's one node is the primary the Sentinels name
  (`EchoMQ.Sentinel`): `seed` is the node found by the last discovery, and a connection to it is
  only ever opened by a discovery (R11.2's `ROLE` check included), never by redialling a
  remembered address. A lost connection, a timeout or a `READONLY` reply closes it (R11.3), so
  the next call finds no live connection and asks the Sentinels again before it sends anything;
  the new connection is unfenced, so the fence is read on it before its first script.

  This module sends through `EchoMQ.Engine`, the seam; it names no key and no raw client.
  """

  alias EchoMQ.{Engine, Sentinel}

  defstruct name: nil,
            cluster: false,
            seed: nil,
            auth: nil,
            db: 0,
            # nil (plaintext), or the seam's TLS settings for every connection of the session (R10.2)
            tls: nil,
            # nil, or %{name, nodes: [{host, port}]} (R11.1): the primary is found through these
            sentinel: nil,
            bundle: nil,
            conns: %{},
            slots: nil

  @max_rounds 16

  @type node_addr :: {String.t(), non_neg_integer()}
  @type item :: %{slot: non_neg_integer(), cmd: [iodata() | integer()], script: String.t() | nil}

  # ------------------------------------------------------------------ connections

  @doc """
  The live connection to `node`, opening it (unfenced) when there is none. Behind Sentinel a
  connection is opened only by a new discovery (R11.3); should that name another primary than
  `node`, the call bound for `node` is not sent (it fails with kind `engine`; the session now
  points at the new primary).
  """
  def conn(%__MODULE__{sentinel: %{}} = s, node, dl) do
    case s.conns do
      %{^node => %{pid: pid}} ->
        if Process.alive?(pid), do: {:ok, pid, s}, else: conn(drop(s, node), node, dl)

      _ ->
        case rediscover(s, dl) do
          {:ok, s} ->
            if s.seed == node or node == nil,
              do: {:ok, s.conns[s.seed].pid, s},
              else:
                {:error, :engine,
                 "the connection to #{addr(node)} was lost and the Sentinels now name #{addr(s.seed)} " <>
                   "as the primary; the call was not sent", s}

          error ->
            error
        end
    end
  end

  def conn(s, node, dl) do
    case s.conns do
      %{^node => %{pid: pid}} ->
        if Process.alive?(pid), do: {:ok, pid, s}, else: open(drop(s, node), node, dl)

      _ ->
        open(s, node, dl)
    end
  end

  # Every connection of the session is opened here (the seed, each primary of the slot map, a
  # MOVED/ASK target, a replacement, the seed again to re-read the slot map), and each gets the
  # url's database: a redirect names a node, never a database, so a connection opened without
  # `SELECT db` would run the session's commands in database 0 (R5.12, R8.5).
  defp open(s, node, dl) do
    case Engine.open_conn(node, s.auth, s.db, s.tls, dl) do
      {:ok, pid} -> {:ok, pid, %{s | conns: Map.put(s.conns, node, %{pid: pid, fenced: false})}}
      {:error, msg} -> {:error, :engine, msg, s}
    end
  end

  @doc "Closes and forgets the connection to `node`."
  def drop(s, node) do
    case Map.pop(s.conns, node) do
      {nil, _} ->
        s

      {%{pid: pid}, conns} ->
        Engine.close_conn(pid)
        %{s | conns: conns}
    end
  end

  @doc """
  Behind Sentinel: a live connection to the session's primary, found afresh (R11.1, R11.2) when
  there is none. Elsewhere a no-op.
  """
  def ensure_primary(%__MODULE__{sentinel: %{}, seed: seed} = s, dl) do
    case s.conns do
      %{^seed => %{pid: pid}} when seed != nil ->
        if Process.alive?(pid), do: {:ok, s}, else: rediscover(s, dl)

      _ ->
        rediscover(s, dl)
    end
  end

  def ensure_primary(s, _dl), do: {:ok, s}

  # Every connection of the session goes first (R5.13: one to an old primary included), then
  # the Sentinels are asked; the connection discovery opened is the session's only one.
  defp rediscover(s, dl) do
    s = close_all(s)

    case Sentinel.discover(s, dl) do
      {:ok, node, pid} -> {:ok, %{s | seed: node, conns: %{node => %{pid: pid, fenced: false}}}}
      {:error, m} -> {:error, :engine, "finding the primary through Sentinel: " <> m, s}
    end
  end

  def close_all(s) do
    Enum.each(s.conns, fn {_, %{pid: pid}} -> Engine.close_conn(pid) end)
    %{s | conns: %{}}
  end

  @doc "After a fence read: every connection open now has been fenced."
  def mark_fenced(s), do: %{s | conns: Map.new(s.conns, fn {n, c} -> {n, %{c | fenced: true}} end)}

  def owner(%__MODULE__{cluster: false, seed: seed}, _slot), do: seed

  def owner(%__MODULE__{slots: slots, seed: seed}, slot) when is_tuple(slots),
    do: elem(slots, slot) || seed

  def owner(%__MODULE__{seed: seed}, _slot), do: seed

  # ------------------------------------------------------------------ cluster topology

  @doc "Cluster connect (R8.1): slot map from the seed, then a connection to every primary."
  def init_cluster(s, dl) do
    with {:ok, pid, s} <- conn(s, s.seed, dl),
         {:ok, slots} <- slots_from(pid, s.seed, dl) do
      s = %{s | slots: slots}
      primaries = slots |> Tuple.to_list() |> Enum.reject(&is_nil/1) |> Enum.uniq()
      s = if s.seed in primaries, do: s, else: drop(s, s.seed)

      Enum.reduce_while(primaries, {:ok, s}, fn node, {:ok, s} ->
        case conn(s, node, dl) do
          {:ok, _pid, s} -> {:cont, {:ok, s}}
          {:error, k, m, s} -> {:halt, {:error, k, m, s}}
        end
      end)
    else
      {:error, k, m, s} -> {:error, k, m, s}
      {:error, m} -> {:error, :engine, m, s}
    end
  end

  defp refresh_slots(s, dl) do
    live = for {node, %{pid: pid}} <- s.conns, Process.alive?(pid), do: {node, pid}

    Enum.reduce_while(live, :none, fn {node, pid}, _ ->
      case slots_from(pid, node, dl) do
        {:ok, slots} -> {:halt, {:ok, slots}}
        {:error, _} -> {:cont, :none}
      end
    end)
    |> case do
      {:ok, slots} ->
        {:ok, %{s | slots: slots}}

      :none ->
        # no live connection answered: ask the seed on a new connection (fenced before use)
        with {:ok, pid, s} <- conn(s, s.seed, dl),
             {:ok, slots} <- slots_from(pid, s.seed, dl) do
          {:ok, %{s | slots: slots}}
        else
          {:error, k, m, s} -> {:error, k, m, s}
          {:error, m} -> {:error, :engine, m, s}
        end
    end
  end

  defp slots_from(pid, {from_host, _} = from, dl) do
    case Engine.raw_pipeline(pid, [["CLUSTER", "SLOTS"]], timeout(dl)) do
      {:ok, [ranges]} when is_list(ranges) and ranges != [] ->
        {:ok, slot_table(ranges, from_host)}

      {:ok, [{:err, m}]} ->
        {:error, "CLUSTER SLOTS on #{addr(from)}: #{m}"}

      {:ok, other} ->
        {:error, "CLUSTER SLOTS on #{addr(from)}: unexpected reply #{inspect(other)}"}

      {:error, r} ->
        {:error, "CLUSTER SLOTS on #{addr(from)}: connection failed: #{inspect(r)}"}
    end
  end

  @doc "A 16384-tuple slot => primary node from a CLUSTER SLOTS reply."
  def slot_table(ranges, default_host) do
    sorted =
      ranges
      |> Enum.map(fn [lo, hi, [host, port | _] | _] ->
        host = if host in ["", "?", nil], do: default_host, else: host
        {int(lo), int(hi), {host, int(port)}}
      end)
      |> Enum.sort()

    {list, next} =
      Enum.reduce(sorted, {[], 0}, fn {lo, hi, node}, {acc, next} ->
        gap = if lo > next, do: List.duplicate(nil, lo - next), else: []
        lo = max(lo, next)
        span = if hi >= lo, do: List.duplicate(node, hi - lo + 1), else: []
        {[span, gap | acc], max(next, hi + 1)}
      end)

    tail = if next < 16384, do: List.duplicate(nil, 16384 - next), else: []
    [tail | list] |> Enum.reverse() |> List.flatten() |> Enum.take(16384) |> List.to_tuple()
  end

  defp int(v) when is_integer(v), do: v
  defp int(v) when is_binary(v), do: String.to_integer(v)

  def addr({h, p}), do: if(String.contains?(h, ":"), do: "[#{h}]:#{p}", else: "#{h}:#{p}")

  # ------------------------------------------------------------------ sending

  defp timeout(dl), do: max(dl - System.monotonic_time(:millisecond), 1)

  @doc """
  Sends `items` (each `%{slot, cmd, script}`) and returns `{:ok, replies, s}` with one reply per
  item in order (a value, or `{:err, message}` for an error reply), or `{:error, kind, msg, s}`.
  Option `fence_read: true` marks the fence read itself (sent on unfenced connections).
  """
  def run(s, items, dl, opts \\ [])
  def run(s, [], _dl, _opts), do: {:ok, [], s}

  def run(s, items, dl, opts) do
    # a pending call: {index, item, redirect target or nil, asking?, NOSCRIPTs seen}
    pending = items |> Enum.with_index() |> Enum.map(fn {it, i} -> {i, it, nil, false, 0} end)

    with {:ok, s} <- ensure_primary(s, dl) do
      case loop(s, pending, [], 0, dl, opts) do
        {:ok, replies, s} -> {:ok, replies, after_readonly(s, replies)}
        other -> other
      end
    end
  end

  @doc """
  R8.11, R11.3: a node that answered READONLY was demoted. Those calls failed (they did not run
  and are not sent again, R4.16); every connection of the session goes, so the next verb opens
  new ones (fence first): on a cluster it follows the demoted node's MOVED to the slot's new
  primary; behind Sentinel it asks the Sentinels again.
  """
  def after_readonly(%__MODULE__{} = s, replies) when s.cluster or s.sentinel != nil do
    if Enum.any?(replies, &match?({:err, "READONLY" <> _}, &1)), do: close_all(s), else: s
  end

  def after_readonly(s, _replies), do: s

  defp loop(s, [], done, _round, _dl, _opts) do
    {:ok, done |> Enum.sort_by(fn {i, _} -> i end) |> Enum.map(fn {_, v} -> v end), s}
  end

  defp loop(s, _pending, _done, round, _dl, _opts) when round > @max_rounds,
    do: {:error, :engine, "too many cluster redirects or retries (#{@max_rounds})", s}

  defp loop(s, pending, done, round, dl, opts) do
    groups = group(s, pending)
    acc0 = {:ok, s, done, [], %{refresh: false, wait: false, loads: []}}

    result =
      Enum.reduce_while(groups, acc0, fn {node, its}, {:ok, s, done, retry, flags} ->
        case send_group(s, node, its, dl, opts) do
          {:ok, replies, s} ->
            case classify(s, node, its, replies, retry, flags) do
              # the common case: one node, one round, nothing to redo: replies are in order
              # (the finals, not the raw replies: a script's error reply that the raw client returned as a
              # value, e.g. a cut READONLY, is the error it was)
              {finals, [], _} when round == 0 and length(groups) == 1 ->
                {:halt, {:fast, finals, s}}

              {finals, retry, flags} ->
                {:cont, {:ok, s, finals ++ done, retry, flags}}
            end

          # on a cluster, a node we cannot even connect to (nothing was sent) may have left the
          # slot map: read the map again and route those calls anew
          {:unreachable, _k, _m, s} when s.cluster ->
            rerouted = for {i, it, _, _, ns} <- its, do: {i, it, nil, false, ns}
            {:cont, {:ok, s, done, rerouted ++ retry, %{flags | refresh: true, wait: true}}}

          {:unreachable, k, m, s} ->
            {:halt, {:error, k, m, s}}

          {:error, k, m, s} ->
            {:halt, {:error, k, m, s}}
        end
      end)

    case result do
      {:fast, finals, s} ->
        # classify built them last first
        {:ok, finals |> Enum.reverse() |> Enum.map(&elem(&1, 1)), s}

      {:error, _, _, _} = e ->
        e

      {:ok, s, done, [], _} ->
        loop(s, [], done, round, dl, opts)

      {:ok, s, done, retry, flags} ->
        with {:ok, s} <- if(flags.refresh, do: refresh_slots(s, dl), else: {:ok, s}),
             {:ok, s} <- load_scripts(s, Enum.uniq(flags.loads), dl) do
          if flags.wait, do: Process.sleep(min(100, timeout(dl)))
          loop(s, Enum.sort_by(retry, &elem(&1, 0)), done, round + 1, dl, opts)
        end
    end
  end

  # One group per node, in the order of each node's first call; calls keep their order.
  defp group(%__MODULE__{cluster: false, seed: seed}, pending), do: [{seed, pending}]

  defp group(s, pending) do
    {order, by} =
      Enum.reduce(pending, {[], %{}}, fn {_, it, to, _, _} = p, {order, by} ->
        node = to || owner(s, it.slot)

        case by do
          %{^node => l} -> {order, Map.put(by, node, [p | l])}
          _ -> {[node | order], Map.put(by, node, [p])}
        end
      end)

    order |> Enum.reverse() |> Enum.map(fn n -> {n, Enum.reverse(by[n])} end)
  end

  defp send_group(s, node, its, dl, opts, tries \\ 2) do
    with {:ok, pid, s} <- fenced_conn(s, node, dl, opts) do
      asking = Enum.any?(its, &elem(&1, 3))

      cmds =
        if asking,
          do: Enum.flat_map(its, fn {_, it, _, a, _} -> if a, do: [["ASKING"], it.cmd], else: [it.cmd] end),
          else: Enum.map(its, fn {_, it, _, _, _} -> it.cmd end)

      case Engine.raw_pipeline(pid, cmds, timeout(dl)) do
        {:ok, replies} ->
          {:ok, if(asking, do: strip_asking(its, replies), else: replies), s}

        # the connection's process was gone before the call reached it: nothing was sent, so a
        # new (fenced) connection may carry it
        {:error, {:noproc, _}} when tries > 0 ->
          send_group(drop(s, node), node, its, dl, opts, tries - 1)

        {:error, reason} ->
          {:error, :engine,
           "connection to #{addr(node)} failed (#{Engine.describe_reason(reason)}); " <>
             "the call may or may not have run and was not re-sent", drop(s, node)}
      end
    end
  end

  # A live connection to `node` that has read the fence since it opened (R3.1, R3.5); with
  # `fence_read: true` (the fence read itself) any live connection. The check is made again after
  # the fence read: a connection that died meanwhile is replaced, and the new one fenced too.
  defp fenced_conn(s, node, dl, opts, tries \\ 3) do
    fence_read = Keyword.get(opts, :fence_read, false)

    with {:ok, pid, s} <- reachable(conn(s, node, dl)),
         {:ok, s} <- ensure_fenced(s, node, dl, opts) do
      case s.conns do
        %{^node => %{pid: ^pid, fenced: f}} when f or fence_read ->
          if Process.alive?(pid) or tries == 0,
            do: {:ok, pid, s},
            else: fenced_conn(s, node, dl, opts, tries - 1)

        _ when tries > 0 ->
          fenced_conn(s, node, dl, opts, tries - 1)

        _ ->
          {:error, :engine, "the connection to #{addr(node)} kept closing while it was being fenced", s}
      end
    end
  end

  defp reachable({:error, k, m, s}), do: {:unreachable, k, m, s}
  defp reachable(ok), do: ok

  defp unreachable_is_error({:unreachable, k, m, s}), do: {:error, k, m, s}
  defp unreachable_is_error(other), do: other

  defp ensure_fenced(s, node, dl, opts) do
    cond do
      Keyword.get(opts, :fence_read, false) -> {:ok, s}
      s.conns[node].fenced -> {:ok, s}
      true -> Engine.reconnect_fence(s, dl)
    end
  end

  defp strip_asking(its, replies) do
    {out, []} =
      Enum.reduce(its, {[], replies}, fn
        {_, _, _, true, _}, {acc, [_asking, r | rest]} -> {[r | acc], rest}
        _, {acc, [r | rest]} -> {[r | acc], rest}
      end)

    Enum.reverse(out)
  end

  # -> {finals [{i, reply}], retry, flags}
  defp classify(s, node, its, replies, retry, flags) do
    its
    |> Enum.zip(replies)
    |> Enum.reduce({[], retry, flags}, fn {{i, it, _to, asking, ns}, r}, {done, retry, flags} ->
      r = if it.script != nil, do: Engine.script_reply(r), else: r

      case {s.cluster, r} do
        {true, {:err, "MOVED " <> rest}} ->
          {done, [{i, it, redirect_node(rest, node), false, ns} | retry], %{flags | refresh: true}}

        {true, {:err, "ASK " <> rest}} ->
          {done, [{i, it, redirect_node(rest, node), true, ns} | retry], flags}

        {true, {:err, "TRYAGAIN" <> _}} ->
          {done, [{i, it, nil, false, ns} | retry], %{flags | wait: true}}

        {true, {:err, "CLUSTERDOWN" <> _}} ->
          {done, [{i, it, nil, false, ns} | retry], %{flags | wait: true}}

        {_, {:err, "NOSCRIPT" <> _ = m}} when it.script != nil ->
          if ns >= 1 do
            {[{i, {:err, "#{m} (again, after SCRIPT LOAD: not retried)"}} | done], retry, flags}
          else
            retry = [{i, it, node, asking, 1} | retry]
            {done, retry, %{flags | loads: [{node, it.script} | flags.loads]}}
          end

        _ ->
          {[{i, r} | done], retry, flags}
      end
    end)
  end

  defp redirect_node(rest, {from_host, _}) do
    [_slot, hp | _] = String.split(rest, " ")
    {host, ":" <> port} = String.split_at(hp, last_colon(hp))
    host = if host == "", do: from_host, else: String.trim(host, "[") |> String.trim("]")
    {host, String.to_integer(port)}
  end

  defp last_colon(hp) do
    {pos, 1} = :binary.matches(hp, ":") |> List.last()
    pos
  end

  defp load_scripts(s, [], _dl), do: {:ok, s}

  defp load_scripts(s, [{node, script} | rest], dl) do
    {cmd, sha} = Engine.script_load_cmd(s.bundle, script)

    with {:ok, pid, s} <- fenced_conn(s, node, dl, []) |> unreachable_is_error() do
      case Engine.raw_pipeline(pid, [cmd], timeout(dl)) do
        {:ok, [^sha]} ->
          load_scripts(s, rest, dl)

        {:ok, [{:err, m}]} ->
          {:error, :engine, "SCRIPT LOAD #{script} on #{addr(node)}: #{m}", s}

        {:ok, [other]} ->
          {:error, :engine, "SCRIPT LOAD #{script} on #{addr(node)} answered #{inspect(other)}, not the bundle's sha #{sha}", s}

        {:error, reason} ->
          {:error, :engine, "SCRIPT LOAD on #{addr(node)}: connection failed (#{Engine.describe_reason(reason)})",
           drop(s, node)}
      end
    end
  end
end
