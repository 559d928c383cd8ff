defmodule EchoMQ.ClusterDbTest do
  @moduledoc """
  R8.5 against fake cluster nodes (`EchoMQ.FakeNode`, loopback only): a cluster url may name any
  database, and every connection the session opens to a node (the seed's, one per primary of the
  slot map, one to follow `MOVED`, one to follow `ASK`, the replacement of one that closed) sends
  `AUTH` and then `SELECT <db>` before anything else. A `SELECT` the engine refuses fails `connect`
  with kind `engine` and the engine's text, and nothing else is sent.
  """
  use ExUnit.Case, async: false
  alias EchoMQ.{FakeNode, Slot, Wire}
  import EchoMQ.TestHelp, only: [call: 2]
  # the fake nodes' reports to this process, read as a log
  import EchoMQ.FakeNode, only: [log: 0, cmds: 2]

  @fence_slot Slot.of_key("emq:fence")
  @q_slot Slot.of_key("emq:{q}:pending")

  setup do
    b = EchoMQ.TestHelp.bundle()
    {:ok, cfg} = Agent.start_link(fn -> %{} end)
    %{state: Wire.new(b), bundle: b, cfg: cfg}
  end

  defp connect(state, seed, path) do
    url = "redis://emq:pw@127.0.0.1:#{seed}#{path}"
    call(state, %{"seq" => 1, "cmd" => "connect", "session" => "c", "url" => url, "cluster" => true})
  end

  defp enqueue(state, seq),
    do: call(state, %{"seq" => seq, "cmd" => "enqueue", "session" => "c", "queue" => "q", "payload" => "x", "delay_ms" => 0})

  # A cluster node. `cfg` holds the slot map (`:slots`, CLUSTER SLOTS' reply), which databases
  # exist (`:dbs`, else 0..15) and, per node name, what its next EVALSHA answers (one use each):
  # `{:moved, port}`, `{:ask, port}` or `:close`; else a job id.
  defp cluster_node(b, cfg, name) do
    fence = [b.protocol, b.version, b.digest]

    fn
      ["AUTH", "emq", "pw"] ->
        {:reply, {:simple, "OK"}}

      ["SELECT", db] ->
        if String.to_integer(db) in Agent.get(cfg, &Map.get(&1, :dbs, 0..15)),
          do: {:reply, {:simple, "OK"}},
          else: {:reply, {:err, "ERR DB index is out of range"}}

      ["CLUSTER", "SLOTS"] ->
        {:reply, Agent.get(cfg, & &1.slots)}

      ["ASKING"] ->
        {:reply, {:simple, "OK"}}

      ["HMGET", "emq:fence" | _] ->
        {:reply, fence}

      ["EVALSHA" | _] ->
        case Agent.get_and_update(cfg, &Map.pop(&1, name)) do
          {:moved, p} -> {:reply, {:err, "MOVED #{@q_slot} 127.0.0.1:#{p}"}}
          {:ask, p} -> {:reply, {:err, "ASK #{@q_slot} 127.0.0.1:#{p}"}}
          :close -> :close
          nil -> {:reply, "j0000000000000001"}
        end

      [c | _] ->
        {:reply, {:err, "ERR unexpected #{c}"}}
    end
  end

  # the seed `a` serves every slot but the fence's, which is `b`'s (as the harness's seed does not
  # own the fence's slot, R8.5)
  defp slot_map(a, b) do
    node = fn p, id -> ["127.0.0.1", p, id] end

    [
      [0, @fence_slot - 1, node.(a, "a")],
      [@fence_slot, @fence_slot, node.(b, "b")],
      [@fence_slot + 1, 16383, node.(a, "a")]
    ]
  end

  # each connection to `name`, as the list of the commands it carried, in the order opened
  defp per_conn(log, name) do
    conns = for({^name, c, cmd} <- log, cmd != :closed, do: c) |> Enum.uniq()
    for c <- conns, do: for({^name, ^c, cmd} <- log, cmd != :closed, do: cmd)
  end

  test "every node connection of a cluster session in database 9 selects it first: seed, primaries, MOVED, ASK, replacement",
       %{state: st, bundle: b, cfg: cfg} do
    assert @q_slot != @fence_slot
    a = FakeNode.start(:a, cluster_node(b, cfg, :a))
    bn = FakeNode.start(:b, cluster_node(b, cfg, :b))
    c = FakeNode.start(:c, cluster_node(b, cfg, :c))
    d = FakeNode.start(:d, cluster_node(b, cfg, :d))
    Agent.update(cfg, &Map.put(&1, :slots, slot_map(a, bn)))

    {r, st} = connect(st, a, "/9")
    assert r["ok"] == %{}, inspect(r)
    log0 = log()
    first = [["AUTH", "emq", "pw"], ["SELECT", "9"]]
    assert cmds(log0, :a) == first ++ [["CLUSTER", "SLOTS"]]
    assert cmds(log0, :b) == first ++ [["HMGET", "emq:fence", "protocol", "bundle", "digest"]]

    # MOVED to a node the slot map does not name: a new connection, database 9 first
    Agent.update(cfg, &Map.put(&1, :a, {:moved, c}))
    {r, st} = enqueue(st, 2)
    assert r["ok"] == "j0000000000000001", inspect(r)
    log_moved = log()
    assert [[["AUTH", "emq", "pw"], ["SELECT", "9"], ["EVALSHA" | _]]] = per_conn(log_moved, :c)

    # ASK to another such node: database 9, then ASKING and the call
    Agent.update(cfg, &Map.put(&1, :a, {:ask, d}))
    {r, st} = enqueue(st, 3)
    assert r["ok"] == "j0000000000000001", inspect(r)
    log_ask = log()
    assert [[["AUTH", "emq", "pw"], ["SELECT", "9"], ["ASKING"], ["EVALSHA" | _]]] = per_conn(log_ask, :d)

    # the seed's connection closes under a call: the call fails (not re-sent); its replacement
    # selects database 9 before the fence is read again and the next call is sent
    Agent.update(cfg, &Map.put(&1, :a, :close))
    {r, st} = enqueue(st, 4)
    assert r["error"]["kind"] == "engine", inspect(r)
    log1 = log()
    {r, _} = enqueue(st, 5)
    assert r["ok"] == "j0000000000000001", inspect(r)
    log2 = log()
    assert [[["AUTH", "emq", "pw"], ["SELECT", "9"], ["EVALSHA" | _]]] = per_conn(log2, :a)
    assert [["HMGET", "emq:fence" | _]] = cmds(log2, :b), "the fence is read again after the replacement (R8.9)"

    # the law itself, over every connection any node saw
    all = log0 ++ log_moved ++ log_ask ++ log1 ++ log2

    for n <- [:a, :b, :c, :d], conn <- per_conn(all, n) do
      assert Enum.take(conn, 2) == first, "a connection to #{n} began #{inspect(Enum.take(conn, 2))}"
    end

    assert length(per_conn(all, :a)) == 2
  end

  test "a cluster url without a database, or with /0, sends no SELECT", %{state: st, bundle: b, cfg: cfg} do
    a = FakeNode.start(:a, cluster_node(b, cfg, :a))
    bn = FakeNode.start(:b, cluster_node(b, cfg, :b))
    Agent.update(cfg, &Map.put(&1, :slots, slot_map(a, bn)))

    for path <- ["", "/", "/0"] do
      {r, _} = connect(st, a, path)
      assert r["ok"] == %{}, "#{path}: #{inspect(r)}"
      log = log()
      assert cmds(log, :a) == [["AUTH", "emq", "pw"], ["CLUSTER", "SLOTS"]], path
      assert [["AUTH", "emq", "pw"], ["HMGET", "emq:fence" | _]] = cmds(log, :b)
    end
  end

  test "a database the engine refuses fails connect with kind engine and its text; nothing else is sent",
       %{state: st, bundle: b, cfg: cfg} do
    a = FakeNode.start(:a, cluster_node(b, cfg, :a))
    bn = FakeNode.start(:b, cluster_node(b, cfg, :b))
    Agent.update(cfg, &(&1 |> Map.put(:slots, slot_map(a, bn)) |> Map.put(:dbs, [9])))

    # never `invalid`: the client does not know the engine's `cluster-databases` nor the user's ACL
    for db <- ["3", "16", "9999999999"] do
      {r, st2} = connect(st, a, "/" <> db)
      assert r["error"]["kind"] == "engine", "#{db}: #{inspect(r)}"
      assert r["error"]["message"] =~ "SELECT #{db}"
      assert r["error"]["message"] =~ "ERR DB index is out of range"
      assert st2.sessions == %{}
      log = log()
      assert cmds(log, :a) == [["AUTH", "emq", "pw"], ["SELECT", db]], "nothing may follow a refused SELECT"
      assert cmds(log, :b) == []
      assert for({:a, conn, :closed} <- log, do: conn) != [], "the refused connection was left open"
    end
  end
end
