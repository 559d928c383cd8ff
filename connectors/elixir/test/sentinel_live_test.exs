defmodule EchoMQ.SentinelLiveTest do
  @moduledoc """
  SPEC §11 end to end on loopback: a private primary, its replica and one Sentinel (`valkey-server
  --sentinel`) started here ($EMQ_VALKEY_SERVER, else ~/.cache/emq/valkey-9.1.2/bin/valkey-server;
  skipped when neither exists). The Sentinel's `emq` user holds only what R11.4 lists, so a
  command past it shows in the Sentinel's `ACL LOG`. A session connects through the Sentinel,
  works, sits through a `SENTINEL FAILOVER`, and must then work on the new primary (fence read
  there, script loaded there), without a new `connect`.
  """
  use ExUnit.Case, async: false
  alias EchoMQ.Wire
  import EchoMQ.TestHelp, only: [call: 2]

  @server System.get_env("EMQ_VALKEY_SERVER") ||
            Path.expand("~/.cache/emq/valkey-9.1.2/bin/valkey-server")

  if not File.exists?(@server), do: @moduletag(skip: "no valkey-server at #{@server}")

  @moduletag timeout: 90_000

  setup_all do
    dir = Path.join(System.tmp_dir!(), "emq-elixir-sentinel-#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    [p1, p2, ps] = for _ <- 1..3, do: free_port()
    user = ~w(--user emq on >pw ~* &* +@all)

    a = spawn_server(dir, "a", ~w(--port #{p1} --bind 127.0.0.1 --save "" --appendonly no --dir #{dir}) ++ user)
    b = spawn_server(dir, "b", ~w(--port #{p2} --bind 127.0.0.1 --save "" --appendonly no --dir #{dir} --replicaof 127.0.0.1 #{p1}) ++ user)

    conf = Path.join(dir, "sentinel.conf")

    File.write!(conf, """
    port #{ps}
    bind 127.0.0.1
    dir #{dir}
    sentinel monitor emq 127.0.0.1 #{p1} 1
    sentinel down-after-milliseconds emq 2000
    sentinel failover-timeout emq 10000
    user default on nopass ~* &* +@all
    user emq on >pw -@all +auth +hello +ping +client|setname +client|setinfo +sentinel|get-master-addr-by-name +sentinel|get-primary-addr-by-name +sentinel|sentinels &+switch-master +subscribe +psubscribe +unsubscribe +punsubscribe
    """)

    s = spawn_server(dir, "s", [conf, "--sentinel"])

    on_exit(fn ->
      for os_pid <- [a, b, s], do: stop(os_pid)
      File.rm_rf(dir)
    end)

    for p <- [p1, p2, ps], do: wait_admin(p, 100)
    # the replica in sync, and the Sentinel knows it
    wait_until(100, fn -> match?({:ok, ["slave", _, _, "connected" | _]}, q(p2, ["ROLE"])) end)
    wait_until(100, fn -> match?({:ok, [_ | _]}, q(ps, ["SENTINEL", "REPLICAS", "emq"])) end)
    %{ports: {p1, p2, ps}}
  end

  # one admin command on a connection of its own (the Sentinel's reconfiguration kills the
  # normal clients of both data nodes)
  defp q(port, cmds) do
    Process.flag(:trap_exit, true)

    case :eredis.start_link(~c"127.0.0.1", port, :undefined, ~c"", :no_reconnect, 1_000) do
      {:ok, pid} ->
        r =
          try do
            case cmds do
              [c | _] when is_list(c) -> :eredis.qp(pid, cmds, 2_000) |> List.last()
              _ -> :eredis.q(pid, cmds, 2_000)
            end
          catch
            :exit, r -> {:error, r}
          end

        Process.exit(pid, :kill)
        r

      other ->
        other
    end
  end

  defp spawn_server(dir, tag, args) do
    log = Path.join(dir, "#{tag}.log")
    cmd = Enum.map_join([@server | args], " ", &shell_quote/1) <> " >#{log} 2>&1 & echo $!"
    {out, 0} = System.cmd("sh", ["-c", cmd])
    String.trim(out)
  end

  defp shell_quote(a), do: "'" <> String.replace(a, "'", "'\\''") <> "'"

  defp stop(os_pid) do
    System.cmd("kill", [os_pid], stderr_to_stdout: true)

    Enum.reduce_while(1..100, nil, fn _, _ ->
      if match?({_, 0}, System.cmd("kill", ["-0", os_pid], stderr_to_stdout: true)),
        do: (Process.sleep(20); {:cont, nil}),
        else: {:halt, nil}
    end)
  end

  defp free_port do
    {:ok, s} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
    {:ok, p} = :inet.port(s)
    :gen_tcp.close(s)
    p
  end

  defp wait_admin(port, 0), do: flunk("server on #{port} did not start")

  defp wait_admin(port, n) do
    if q(port, ["PING"]) == {:ok, "PONG"}, do: :ok, else: (Process.sleep(50); wait_admin(port, n - 1))
  end

  defp wait_until(0, _fun), do: flunk("timed out waiting")

  defp wait_until(n, fun) do
    if fun.(), do: :ok, else: (Process.sleep(100); wait_until(n - 1, fun))
  end

  defp enqueue(st, seq),
    do: call(st, %{"seq" => seq, "cmd" => "enqueue", "session" => "w", "queue" => "q", "payload" => "x", "delay_ms" => 0})

  test "connect through the Sentinel, then follow a SENTINEL FAILOVER without a new connect",
       %{ports: {p1, p2, ps}} do
    {:ok, _} = q(ps, ["ACL", "LOG", "RESET"])
    st = Wire.new(EchoMQ.TestHelp.bundle())

    req = %{
      "seq" => 1,
      "cmd" => "connect",
      "session" => "w",
      "url" => "redis://emq:pw@127.0.0.1:#{ps}/5",
      # a dead Sentinel first: skipped
      "sentinel" => %{"name" => "emq", "nodes" => ["127.0.0.1:#{free_port()}", "127.0.0.1:#{ps}"]}
    }

    {r, st} = call(st, req)
    assert r["ok"] == %{}, inspect(r)
    {r, st} = enqueue(st, 2)
    assert r["ok"] == "j0000000000000001"
    assert {:ok, "1"} = q(p1, [["SELECT", "5"], ["ZCARD", "emq:{q}:pending"]])

    # the failover: the replica (p2) is promoted, the old primary (p1) becomes its replica
    wait_until(100, fn -> q(ps, ["SENTINEL", "FAILOVER", "emq"]) == {:ok, "OK"} end)

    wait_until(150, fn ->
      q(ps, ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "emq"]) == {:ok, ["127.0.0.1", "#{p2}"]} and
        match?({:ok, ["master" | _]}, q(p2, ["ROLE"]))
    end)

    # the old primary demoted now (Sentinel would do it within its next INFO round, ~10 s, and kill
    # its normal clients); REPLICAOF keeps the session's connection open, so it meets READONLY
    assert {:ok, "OK"} = q(p1, ["REPLICAOF", "127.0.0.1", "#{p2}"])

    # the session's next calls: at most the first may fail (kind engine: READONLY, or a connection
    # Sentinel killed), every one after a success works
    {results, _} =
      Enum.map_reduce(3..6, st, fn seq, st ->
        {r, st} = enqueue(st, seq)
        {r, st}
      end)

    oks = Enum.map(results, &Map.has_key?(&1, "ok"))
    first_ok = Enum.find_index(oks, & &1)
    assert first_ok != nil and first_ok <= 1, inspect(results)
    assert Enum.drop(oks, first_ok) |> Enum.all?(), inspect(results)
    for r <- results, Map.has_key?(r, "error"), do: assert(r["error"]["kind"] == "engine")

    {:ok, n} = q(p2, [["SELECT", "5"], ["ZCARD", "emq:{q}:pending"]])
    assert String.to_integer(n) == 1 + (4 - first_ok)

    # R11.4: nothing the Sentinel's emq user may not run was sent to it
    assert {:ok, []} = q(ps, ["ACL", "LOG"])
  end
end
