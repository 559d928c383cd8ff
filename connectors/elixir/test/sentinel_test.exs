defmodule EchoMQ.SentinelTest do
  @moduledoc """
  SPEC §11 against fake Sentinels and data nodes (`EchoMQ.FakeNode`, loopback only): validation
  of `sentinel` (nothing dialled), discovery past a refusing, a silent, an ignorant and a stale
  Sentinel, R11.4 (a Sentinel hears AUTH and the one question, no SELECT), R11.2 (`ROLE` first; a
  replica hears nothing else), R11.3 (a READONLY, a lost connection: the call fails, is not
  re-sent, and the next call asks the Sentinels again, reads the fence, loads its script), and
  the same over TLS.
  """
  use ExUnit.Case, async: false
  alias EchoMQ.{FakeNode, Wire}
  import EchoMQ.TestHelp, only: [call: 2]
  # the fake nodes' reports to this process, read as a log
  import EchoMQ.FakeNode, only: [log: 0, cmds: 2]

  setup do
    b = EchoMQ.TestHelp.bundle()
    %{state: Wire.new(b), bundle: b}
  end

  defp connect(state, sentinels, opts \\ []) do
    db = Keyword.get(opts, :db, 3)
    host = Keyword.get(opts, :host, "127.0.0.1")
    scheme = if opts[:ca_file], do: "rediss", else: "redis"
    [first | _] = sentinels

    req = %{
      "seq" => 1,
      "cmd" => "connect",
      "session" => "s",
      "url" => "#{scheme}://emq:pw@#{host}:#{first}/#{db}",
      "sentinel" => %{"name" => "emq", "nodes" => Enum.map(sentinels, &"#{host}:#{&1}")}
    }

    req = if opts[:ca_file], do: Map.put(req, "ca_file", opts[:ca_file]), else: req
    call(state, req)
  end

  defp enqueue(state, seq),
    do: call(state, %{"seq" => seq, "cmd" => "enqueue", "session" => "s", "queue" => "q", "payload" => "x", "delay_ms" => 0})

  # a Sentinel naming whatever `target` holds now ({host, port} or nil)
  defp sentinel(target) do
    fn
      ["AUTH", "emq", "pw"] -> {:reply, {:simple, "OK"}}
      ["SENTINEL", "get-master-addr-by-name", "emq"] -> {:reply, named(target)}
      [c | _] -> {:reply, {:err, "NOPERM this user has no permissions to run the '#{c}' command"}}
    end
  end

  defp named(agent) when is_pid(agent) do
    case Agent.get(agent, & &1) do
      nil -> nil
      {h, p} -> [h, "#{p}"]
    end
  end

  defp named({h, p}), do: [h, "#{p}"]
  defp named(nil), do: nil

  # a data node: ROLE `role`; scripts per `mode` (:ok, :readonly, :close)
  defp data_node(b, role, mode \\ :ok) do
    {:ok, loaded} = Agent.start_link(fn -> MapSet.new() end)
    fence = [b.protocol, b.version, b.digest]

    fn
      ["AUTH", "emq", "pw"] ->
        {:reply, {:simple, "OK"}}

      ["ROLE"] ->
        if role == "master",
          do: {:reply, ["master", 0, []]},
          else: {:reply, ["slave", "127.0.0.1", 1, "connected", 0]}

      ["SELECT", _] ->
        {:reply, {:simple, "OK"}}

      ["HMGET", "emq:fence" | _] ->
        {:reply, fence}

      ["SCRIPT", "LOAD", src] ->
        sha = :crypto.hash(:sha, src) |> Base.encode16(case: :lower)
        Agent.update(loaded, &MapSet.put(&1, sha))
        {:reply, sha}

      ["EVALSHA", sha | _] ->
        cond do
          mode == :readonly -> {:reply, {:err, "READONLY You can't write against a read only replica."}}
          mode == :close -> :close
          not Agent.get(loaded, &MapSet.member?(&1, sha)) -> {:reply, {:err, "NOSCRIPT No matching script. Please use EVAL."}}
          true -> {:reply, "j0000000000000001"}
        end

      [c | _] ->
        {:reply, {:err, "NOPERM unexpected #{c}"}}
    end
  end

  defp conns(log, name), do: log |> Enum.filter(&(elem(&1, 0) == name)) |> Enum.map(&elem(&1, 1)) |> Enum.uniq()
  defp closed(log, name), do: for({^name, c, :closed} <- log, do: c)

  # ------------------------------------------------------------------ validation

  test "a bad sentinel is invalid and nothing is dialled", %{state: st} do
    {l, port} = listener()
    url = "redis://emq:pw@127.0.0.1:#{port}/0"
    good = %{"name" => "emq", "nodes" => ["127.0.0.1:#{port}"]}

    bad = [
      {%{"sentinel" => %{"name" => "emq", "nodes" => []}}, "at least one"},
      {%{"sentinel" => %{"name" => "", "nodes" => ["127.0.0.1:#{port}"]}}, "non-empty"},
      {%{"sentinel" => %{"nodes" => ["127.0.0.1:#{port}"]}}, "sentinel.name"},
      {%{"sentinel" => %{"name" => 7, "nodes" => ["127.0.0.1:#{port}"]}}, "sentinel.name"},
      {%{"sentinel" => %{"name" => "emq"}}, "sentinel.nodes"},
      {%{"sentinel" => %{"name" => "emq", "nodes" => "127.0.0.1:#{port}"}}, "sentinel.nodes"},
      {%{"sentinel" => %{"name" => "emq", "nodes" => ["127.0.0.1"]}}, "no port"},
      {%{"sentinel" => %{"name" => "emq", "nodes" => ["127.0.0.1:0"]}}, "bad port"},
      {%{"sentinel" => %{"name" => "emq", "nodes" => ["127.0.0.1:65536"]}}, "bad port"},
      {%{"sentinel" => %{"name" => "emq", "nodes" => ["127.0.0.1:x"]}}, "bad port"},
      {%{"sentinel" => %{"name" => "emq", "nodes" => [":26379"]}}, "host:port"},
      {%{"sentinel" => %{"name" => "emq", "nodes" => ["127.0.0.1:#{port}", 5]}}, "string"},
      {%{"sentinel" => %{"name" => "emq", "nodes" => ["::1:26379"]}}, "host:port"},
      {%{"sentinel" => "emq"}, "object"},
      {%{"sentinel" => good, "cluster" => true}, "cluster"}
    ]

    for {extra, says} <- bad do
      req = Map.merge(%{"seq" => 1, "cmd" => "connect", "session" => "s", "url" => url}, extra)
      {r, _} = call(st, req)
      assert r["error"]["kind"] == "invalid", inspect(extra)
      assert r["error"]["message"] =~ says, "#{inspect(extra)}: #{r["error"]["message"]}"
    end

    assert {:error, :timeout} = :gen_tcp.accept(l, 50), "nothing may be dialled"
  end

  test "\"sentinel\": null is no sentinel", %{state: st, bundle: b} do
    p = FakeNode.start(:node, data_node(b, "master"))
    req = %{"seq" => 1, "cmd" => "connect", "session" => "s", "url" => "redis://emq:pw@127.0.0.1:#{p}/0", "sentinel" => nil}
    {r, _} = call(st, req)
    assert r["ok"] == %{}
    assert cmds(log(), :node) == [["AUTH", "emq", "pw"], ["HMGET", "emq:fence", "protocol", "bundle", "digest"]]
  end

  # ------------------------------------------------------------------ R11.1, R11.2, R11.4

  test "connect finds the primary past a refusing, a silent, an ignorant and a stale Sentinel", %{state: st, bundle: b} do
    primary = FakeNode.start(:primary, data_node(b, "master"))
    replica = FakeNode.start(:replica, data_node(b, "slave"))
    silent = FakeNode.start(:silent, fn _ -> :silent end)
    ignorant = FakeNode.start(:ignorant, sentinel(nil))
    stale = FakeNode.start(:stale, sentinel({"127.0.0.1", replica}))
    good = FakeNode.start(:good, sentinel({"127.0.0.1", primary}))
    last = FakeNode.start(:last, sentinel({"127.0.0.1", primary}))

    t0 = System.monotonic_time(:millisecond)
    {r, st} = connect(st, [FakeNode.refusing(), silent, ignorant, stale, good, last])
    took = System.monotonic_time(:millisecond) - t0
    assert r["ok"] == %{}, inspect(r)
    assert took < 3_000, "the silent Sentinel held connect for #{took} ms"

    log = log()
    ask = [["AUTH", "emq", "pw"], ["SENTINEL", "get-master-addr-by-name", "emq"]]
    # R11.4: a Sentinel hears AUTH and the question, nothing else (no SELECT though the db is 3)
    assert cmds(log, :ignorant) == ask
    assert cmds(log, :stale) == ask
    assert cmds(log, :good) == ask
    assert cmds(log, :last) == [], "a Sentinel after the one that named the primary is not asked"
    assert cmds(log, :silent) == [["AUTH", "emq", "pw"]]
    # every Sentinel connection is closed after its question
    for n <- [:silent, :ignorant, :stale, :good], do: assert(closed(log, n) == conns(log, n), "#{n} left open")
    # R11.2: the replica hears AUTH and ROLE, and is closed
    assert cmds(log, :replica) == [["AUTH", "emq", "pw"], ["ROLE"]]
    assert closed(log, :replica) == conns(log, :replica)
    # the primary: ROLE before SELECT and the fence read
    assert cmds(log, :primary) == [
             ["AUTH", "emq", "pw"],
             ["ROLE"],
             ["SELECT", "3"],
             ["HMGET", "emq:fence", "protocol", "bundle", "digest"]
           ]

    {r, _} = enqueue(st, 2)
    assert r["ok"] == "j0000000000000001"
    # NOSCRIPT -> SCRIPT LOAD -> EVALSHA on the primary
    assert [["EVALSHA" | _], ["SCRIPT", "LOAD", _], ["EVALSHA" | _]] = cmds(log(), :primary)
  end

  test "no Sentinel answers: kind engine, saying so", %{state: st} do
    silent = FakeNode.start(:silent, fn _ -> :silent end)
    t0 = System.monotonic_time(:millisecond)
    {r, _} = connect(st, [FakeNode.refusing(), silent, FakeNode.refusing()])
    assert System.monotonic_time(:millisecond) - t0 < 3_000
    assert r["error"]["kind"] == "engine"
    assert r["error"]["message"] =~ "no Sentinel answered"
  end

  test "no Sentinel knows the name: kind engine, saying so", %{state: st} do
    a = FakeNode.start(:a, sentinel(nil))
    b = FakeNode.start(:b, sentinel(nil))
    {r, _} = connect(st, [a, b])
    assert r["error"]["kind"] == "engine"
    assert r["error"]["message"] =~ "no Sentinel knows the name \"emq\""
  end

  test "every Sentinel names a replica: kind engine, the replica hears only AUTH and ROLE", %{state: st, bundle: b} do
    replica = FakeNode.start(:replica, data_node(b, "slave"))
    a = FakeNode.start(:a, sentinel({"127.0.0.1", replica}))
    {r, _} = connect(st, [a])
    assert r["error"]["kind"] == "engine"
    assert r["error"]["message"] =~ "not master"
    log = log()
    assert cmds(log, :replica) == [["AUTH", "emq", "pw"], ["ROLE"]]
    assert closed(log, :replica) == conns(log, :replica)
  end

  # R11.1: a named node's whole check (connect, AUTH, ROLE, SELECT) ends within the check's share,
  # so three Sentinels naming a node that accepts and never answers (a stopped primary behind a
  # proxy), or one that answers ROLE master and then nothing, fail connect well inside 10 s
  test "every Sentinel names a silent node: kind engine, in time", %{state: st} do
    silent = FakeNode.start(:silent, fn _ -> :silent end)

    mute =
      FakeNode.start(:mute, fn
        ["AUTH" | _] -> {:reply, {:simple, "OK"}}
        ["ROLE"] -> {:reply, ["master", 0, []]}
        _ -> :silent
      end)

    ss = for {n, p} <- [a: silent, b: mute, c: silent], do: FakeNode.start(n, sentinel({"127.0.0.1", p}))
    t0 = System.monotonic_time(:millisecond)
    {r, _} = connect(st, ss)
    took = System.monotonic_time(:millisecond) - t0
    assert r["error"]["kind"] == "engine", inspect(r)
    assert r["error"]["message"] =~ "no Sentinel named a primary"
    assert took < 8_000, "connect took #{took} ms"
    log = log()
    assert cmds(log, :silent) == [["AUTH", "emq", "pw"], ["AUTH", "emq", "pw"]]
    assert cmds(log, :mute) == [["AUTH", "emq", "pw"], ["ROLE"], ["SELECT", "3"]]
  end

  # the AUTH after a slow TLS handshake gets what is left of the check's share, not a share of its
  # own: a named node whose handshake takes 1.5 s and which then answers nothing costs 2 s, not 3.5
  test "rediss://: a slow handshake and a silent AUTH cost one share", %{state: st} do
    {ca, srv} = pki()
    {:ok, l} = :ssl.listen(0, [:binary, ip: {127, 0, 0, 1}, active: false, reuseaddr: true] ++ srv)
    {:ok, {_, port}} = :ssl.sockname(l)

    spawn(fn ->
      {:ok, t} = :ssl.transport_accept(l)
      Process.sleep(1_500)

      # then read AUTH and answer nothing, until the client gives up
      with {:ok, c} <- :ssl.handshake(t, 5_000), {:ok, _} <- :ssl.recv(c, 0), do: :ssl.recv(c, 0)
    end)

    s1 = FakeNode.start(:s1, sentinel({"localhost", port}), srv)
    t0 = System.monotonic_time(:millisecond)
    {r, _} = connect(st, [s1], host: "localhost", ca_file: ca, db: 0)
    took = System.monotonic_time(:millisecond) - t0
    assert r["error"]["kind"] == "engine", inspect(r)
    assert took < 2_800, "connect took #{took} ms past one named node"
  end

  # ------------------------------------------------------------------ R11.3

  for {mode, what} <- [readonly: "a READONLY reply", close: "a lost connection"] do
    test "after #{what} the call fails, is not re-sent, and the next call asks the Sentinels again",
         %{state: st, bundle: b} do
      {:ok, target} = Agent.start_link(fn -> nil end)
      old = FakeNode.start(:old, data_node(b, "master", unquote(mode)))
      new = FakeNode.start(:new, data_node(b, "master"))
      Agent.update(target, fn _ -> {"127.0.0.1", old} end)
      s1 = FakeNode.start(:s1, sentinel(target))

      {r, st} = connect(st, [s1])
      assert r["ok"] == %{}
      # the failover: the Sentinel names the new primary from now on
      Agent.update(target, fn _ -> {"127.0.0.1", new} end)
      log()

      {r, st} = enqueue(st, 2)
      assert r["error"]["kind"] == "engine"
      log1 = log()
      assert length(for ["EVALSHA" | _] <- cmds(log1, :old), do: 1) == 1, "the failed call was re-sent"
      assert cmds(log1, :new) == [], "nothing goes to the new primary before the next call"
      assert cmds(log1, :s1) == []

      {r, _} = enqueue(st, 3)
      assert r["ok"] == "j0000000000000001", inspect(r)
      log2 = log()
      assert cmds(log2, :old) == []
      assert closed(log1 ++ log2, :old) == conns(log1, :old), "the old primary's connection was left open"
      assert cmds(log2, :s1) == [["AUTH", "emq", "pw"], ["SENTINEL", "get-master-addr-by-name", "emq"]]

      assert [
               ["AUTH", "emq", "pw"],
               ["ROLE"],
               ["SELECT", "3"],
               ["HMGET", "emq:fence" | _],
               ["EVALSHA" | _],
               ["SCRIPT", "LOAD", _],
               ["EVALSHA" | _]
             ] = cmds(log2, :new)
    end
  end

  test "a failed rediscovery fails that call; the next call asks again", %{state: st, bundle: b} do
    {:ok, target} = Agent.start_link(fn -> nil end)
    old = FakeNode.start(:old, data_node(b, "master", :close))
    new = FakeNode.start(:new, data_node(b, "master"))
    Agent.update(target, fn _ -> {"127.0.0.1", old} end)
    s1 = FakeNode.start(:s1, sentinel(target))

    {_, st} = connect(st, [s1])
    Agent.update(target, fn _ -> nil end)
    {r, st} = enqueue(st, 2)
    assert r["error"]["kind"] == "engine"
    {r, st} = enqueue(st, 3)
    assert r["error"]["kind"] == "engine"
    assert r["error"]["message"] =~ "knows the name"
    Agent.update(target, fn _ -> {"127.0.0.1", new} end)
    {r, _} = enqueue(st, 4)
    assert r["ok"] == "j0000000000000001"
  end

  # ------------------------------------------------------------------ over TLS (R10.2)

  # a CA file and a server config whose certificate names localhost, signed by that CA
  defp pki do
    {:ok, _} = Application.ensure_all_started(:ssl)
    key = {:namedCurve, :secp256r1}
    san = {:Extension, {2, 5, 29, 17}, false, [dNSName: ~c"localhost"]}

    data =
      :public_key.pkix_test_data(%{
        server_chain: %{root: [key: key], intermediates: [], peer: [key: key, extensions: [san]]},
        client_chain: %{root: [key: key], intermediates: [], peer: [key: key]}
      })

    ca = Path.join(System.tmp_dir!(), "emq-elixir-sentinel-ca-#{System.unique_integer([:positive])}.pem")
    File.write!(ca, :public_key.pem_encode(for d <- data.client_config[:cacerts], do: {:Certificate, d, :not_encrypted}))
    on_exit(fn -> File.rm(ca) end)
    {ca, data.server_config}
  end

  test "rediss://: the Sentinels and the primary speak TLS, verified by the name localhost", %{state: st, bundle: b} do
    {ca, srv} = pki()

    primary = FakeNode.start(:primary, data_node(b, "master"), srv)
    replica = FakeNode.start(:replica, data_node(b, "slave"), srv)
    stale = FakeNode.start(:stale, sentinel({"localhost", replica}), srv)
    good = FakeNode.start(:good, sentinel({"localhost", primary}), srv)
    # a plaintext Sentinel first: a rediss:// session never speaks plaintext to it
    plain = FakeNode.start(:plain, sentinel({"localhost", primary}))

    {r, st} = connect(st, [plain, stale, good], host: "localhost", ca_file: ca, db: 0)
    assert r["ok"] == %{}, inspect(r)
    log = log()
    assert cmds(log, :plain) == [], "plaintext RESP went to a Sentinel of a rediss:// session"
    assert cmds(log, :replica) == [["AUTH", "emq", "pw"], ["ROLE"]]
    assert cmds(log, :good) == [["AUTH", "emq", "pw"], ["SENTINEL", "get-master-addr-by-name", "emq"]]
    assert [["AUTH", "emq", "pw"], ["ROLE"], ["HMGET", "emq:fence" | _]] = cmds(log, :primary)
    {r, _} = enqueue(st, 2)
    assert r["ok"] == "j0000000000000001"
  end

  defp listener do
    {:ok, l} = :gen_tcp.listen(0, [:binary, ip: {127, 0, 0, 1}, active: false])
    {:ok, port} = :inet.port(l)
    {l, port}
  end
end
