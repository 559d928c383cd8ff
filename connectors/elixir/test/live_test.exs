defmodule EchoMQ.LiveTest do
  @moduledoc """
  End to end on a real engine, on loopback only: a private valkey-server started here
  ($EMQ_VALKEY_SERVER, else ~/.cache/emq/valkey-9.1.2/bin/valkey-server; skipped when neither
  exists). Covers the fence, EVALSHA after SCRIPT FLUSH, and a lost reply through a small proxy
  in this file: kind engine, no re-send, and a fenced reconnect on the next verb.
  """
  use ExUnit.Case, async: false
  alias EchoMQ.Wire
  import EchoMQ.TestHelp, only: [call: 2]

  @server System.get_env("EMQ_VALKEY_SERVER") ||
            Path.expand("~/.cache/emq/valkey-9.1.2/bin/valkey-server")

  if not File.exists?(@server), do: @moduletag(skip: "no valkey-server at #{@server}")

  setup_all do
    port = free_port()
    dir = Path.join(System.tmp_dir!(), "emq-elixir-live-#{port}")
    File.mkdir_p!(dir)

    srv =
      Port.open({:spawn_executable, @server}, [
        :binary,
        args: ~w(--port #{port} --bind 127.0.0.1 --requirepass pw --save "" --appendonly no --dir #{dir})
      ])

    os_pid = Port.info(srv)[:os_pid]
    # on_exit runs in another process, after this one (the port's owner) is gone: kill by os pid
    on_exit(fn ->
      System.cmd("kill", [to_string(os_pid)])
      # wait until it is gone, so nothing of it outlives the test run
      Enum.reduce_while(1..100, nil, fn _, _ ->
        if match?({_, 0}, System.cmd("kill", ["-0", to_string(os_pid)], stderr_to_stdout: true)),
          do: (Process.sleep(20); {:cont, nil}),
          else: {:halt, nil}
      end)
      File.rm_rf(dir)
    end)
    admin = wait_admin(port, 50)
    %{port: port, admin: admin}
  end

  defp free_port do
    {:ok, s} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
    {:ok, p} = :inet.port(s)
    :gen_tcp.close(s)
    p
  end

  defp wait_admin(port, 0), do: flunk("valkey-server on #{port} did not start")

  defp wait_admin(port, n) do
    Process.flag(:trap_exit, true)

    with {:ok, pid} <- :eredis.start_link(~c"127.0.0.1", port, :undefined, ~c"pw", :no_reconnect, 500),
         {:ok, "PONG"} <- :eredis.q(pid, ["PING"]) do
      pid
    else
      _ ->
        Process.sleep(50)
        wait_admin(port, n - 1)
    end
  end

  defp admin(a, db, cmd) do
    {:ok, _} = :eredis.q(a, ["SELECT", db])
    {:ok, v} = :eredis.q(a, cmd)
    v
  end

  defp fresh, do: Wire.new(EchoMQ.TestHelp.bundle())

  test "the fence is installed on a fresh database and a foreign one refused", %{port: p, admin: a} do
    {r, st} = call(fresh(), %{"seq" => 1, "cmd" => "connect", "session" => "w", "url" => "redis://:pw@127.0.0.1:#{p}/1"})
    assert r["ok"] == %{}
    assert admin(a, 1, ["HGET", "emq:fence", "protocol"]) == "1"
    {r, _} = call(st, %{"seq" => 2, "cmd" => "enqueue", "session" => "w", "queue" => "q", "payload" => "x", "delay_ms" => 0})
    assert r["ok"] == "j0000000000000001"

    admin(a, 2, ["HSET", "emq:fence", "protocol", "2", "bundle", "2.0.0"])
    {r, _} = call(fresh(), %{"seq" => 1, "cmd" => "connect", "session" => "w", "url" => "redis://:pw@127.0.0.1:#{p}/2"})
    assert r["error"]["kind"] == "fence"
    assert r["error"]["message"] =~ "2" and r["error"]["message"] =~ "1"
  end

  test "after SCRIPT FLUSH the next call loads once and succeeds", %{port: p, admin: a} do
    {_, st} = call(fresh(), %{"seq" => 1, "cmd" => "connect", "session" => "w", "url" => "redis://:pw@127.0.0.1:#{p}/3"})
    {:ok, _} = :eredis.q(a, ["SCRIPT", "FLUSH"])
    {r, st} = call(st, %{"seq" => 2, "cmd" => "enqueue", "session" => "w", "queue" => "q", "payload" => "x", "delay_ms" => 0})
    assert r["ok"] == "j0000000000000001"
    {r, _} = call(st, %{"seq" => 3, "cmd" => "claim", "session" => "w", "queue" => "q", "lease_ms" => 1000})
    assert r["ok"] == %{"id" => "j0000000000000001", "payload" => "x", "attempts" => 1}
  end

  test "a lost reply is kind engine, is not re-sent, and the next verb reconnects", %{port: p, admin: a} do
    # the enqueue script is cached, so the cut EVALSHA is the one that runs
    {:ok, _} = :eredis.q(a, ["SCRIPT", "LOAD", EchoMQ.TestHelp.bundle().scripts["enqueue"].source])
    proxy = start_proxy(p)
    url = "redis://:pw@127.0.0.1:#{proxy}/4"
    {r, st} = call(fresh(), %{"seq" => 1, "cmd" => "connect", "session" => "w", "url" => url})
    assert r["ok"] == %{}
    # the proxy forwards the first EVALSHA, lets it run, and closes without the reply
    {r, st} = call(st, %{"seq" => 2, "cmd" => "enqueue", "session" => "w", "queue" => "q", "payload" => "x", "delay_ms" => 0})
    assert r["error"]["kind"] == "engine"
    assert admin(a, 4, ["ZCARD", "emq:{q}:pending"]) == "1", "the script ran once and was not re-sent"
    {r, _} = call(st, %{"seq" => 3, "cmd" => "enqueue", "session" => "w", "queue" => "q", "payload" => "y", "delay_ms" => 0})
    assert r["ok"] == "j0000000000000002"
    assert admin(a, 4, ["ZCARD", "emq:{q}:pending"]) == "2"
  end

  # A proxy that cuts the first connection that carries an EVALSHA, after forwarding it.
  defp start_proxy(upstream) do
    {:ok, ls} = :gen_tcp.listen(0, [:binary, ip: {127, 0, 0, 1}, active: false, reuseaddr: true])
    {:ok, port} = :inet.port(ls)
    armed = :atomics.new(1, [])
    :atomics.put(armed, 1, 1)
    spawn_link(fn -> accept(ls, upstream, armed) end)
    port
  end

  defp accept(ls, upstream, armed) do
    {:ok, c} = :gen_tcp.accept(ls)
    {:ok, u} = :gen_tcp.connect(~c"127.0.0.1", upstream, [:binary, active: false])
    cut = :atomics.new(1, [])
    up = spawn(fn -> relay_up(c, u, armed, cut) end)
    :ok = :gen_tcp.controlling_process(c, up)
    down = spawn(fn -> relay_down(u, c, cut) end)
    :ok = :gen_tcp.controlling_process(u, down)
    accept(ls, upstream, armed)
  end

  defp relay_up(c, u, armed, cut) do
    case :gen_tcp.recv(c, 0) do
      {:ok, data} ->
        if String.contains?(data, "EVALSHA") and :atomics.compare_exchange(armed, 1, 1, 0) == :ok do
          # from now on nothing goes back to the client on this connection
          :atomics.put(cut, 1, 1)
          :gen_tcp.send(u, data)
          Process.sleep(100)
          :gen_tcp.close(c)
          :gen_tcp.close(u)
        else
          :gen_tcp.send(u, data)
          relay_up(c, u, armed, cut)
        end

      _ ->
        :gen_tcp.close(u)
    end
  end

  defp relay_down(u, c, cut) do
    case :gen_tcp.recv(u, 0) do
      {:ok, data} ->
        if :atomics.get(cut, 1) == 0, do: :gen_tcp.send(c, data)
        relay_down(u, c, cut)

      _ ->
        :gen_tcp.close(c)
    end
  end
end
