defmodule EchoMQ.WireTest do
  use ExUnit.Case, async: true
  alias EchoMQ.{JSON, Wire}

  setup_all do
    %{state: Wire.new(EchoMQ.TestHelp.bundle())}
  end

  # One request through the wire; returns the decoded response (or :stop) and the new state.
  defp call(state, req) do
    line = if is_binary(req), do: req, else: IO.iodata_to_binary(JSON.encode(req))

    case Wire.handle_line(line, state) do
      {:reply, out, state} ->
        out = IO.iodata_to_binary(out)
        assert String.ends_with?(out, "\n")
        assert length(String.split(out, "\n")) == 2, "one line per response"
        {:ok, resp} = JSON.decode(out)
        {resp, state}

      {:stop, state} ->
        {:stop, state}
    end
  end

  defp error_kind(state, req) do
    {%{"error" => %{"kind" => k, "message" => m}} = r, _} = call(state, req)
    assert Map.has_key?(r, "seq")
    {k, m}
  end

  test "hello names the bundle and every script's sha (R5.3)", %{state: st} do
    {resp, _} = call(st, %{"seq" => 1, "cmd" => "hello", "protocol" => 1})
    assert resp["seq"] == 1
    ok = resp["ok"]
    assert ok["bundle"] == "1.0.0"
    assert ok["language"] == "elixir"
    assert is_binary(ok["name"]) and is_binary(ok["version"])
    manifest = File.read!(Path.join(EchoMQ.TestHelp.bundle_dir(), "manifest.json")) |> JSON.decode() |> elem(1)
    assert ok["scripts"] == Map.new(manifest["scripts"], &{&1["name"], &1["sha1"]})
  end

  test "hello with another protocol is unsupported; a bad one invalid", %{state: st} do
    assert {"unsupported", m} = error_kind(st, %{"seq" => 1, "cmd" => "hello", "protocol" => 2})
    assert m =~ "2"
    for p <- ["1", 1.0, 0, -1, nil, true, [1]] do
      assert {"unsupported", _} = error_kind(st, %{"seq" => 1, "cmd" => "hello", "protocol" => p}), inspect(p)
    end

    assert {"invalid", _} = error_kind(st, %{"seq" => 1, "cmd" => "hello"})
  end

  test "unknown cmd is unsupported (R5.5)", %{state: st} do
    assert {"unsupported", _} = error_kind(st, %{"seq" => 3, "cmd" => "frobnicate", "session" => "w1"})
  end

  test "stop gets no response (R5.9)", %{state: st} do
    assert {:stop, _} = call(st, %{"seq" => 9, "cmd" => "stop"})
  end

  test "seq is echoed, even on a line that is not a request", %{state: st} do
    {resp, _} = call(st, %{"seq" => 42, "cmd" => "pending_size", "session" => "w", "queue" => "q"})
    assert resp["seq"] == 42
    {resp, _} = call(st, ~s({"seq": 7, "cmd": ))
    assert resp == %{"seq" => 7, "error" => resp["error"]}
    assert resp["error"]["kind"] == "invalid"
    {resp, _} = call(st, "[1,2]")
    assert resp["seq"] == nil and resp["error"]["kind"] == "invalid"
    {resp, _} = call(st, ~s({"seq": 8}))
    assert resp["seq"] == 8 and resp["error"]["kind"] == "invalid"
  end

  test "verbs on an unknown session are invalid (R4.8) and name it", %{state: st} do
    reqs = [
      %{"cmd" => "enqueue", "queue" => "q", "payload" => "p", "delay_ms" => 0},
      %{"cmd" => "claim", "queue" => "q", "lease_ms" => 0},
      %{"cmd" => "complete", "queue" => "q", "id" => "j0000000000000001", "attempts" => 1},
      %{"cmd" => "retry", "queue" => "q", "id" => "j0000000000000001", "attempts" => 1, "backoff_ms" => 0,
        "max_attempts" => 1},
      %{"cmd" => "promote", "queue" => "q", "limit" => 1},
      %{"cmd" => "reap", "queue" => "q", "max_attempts" => 1, "limit" => 1},
      %{"cmd" => "browse", "queue" => "q", "offset" => 0, "limit" => 0},
      %{"cmd" => "pending_size", "queue" => "q"},
      %{"cmd" => "pipeline_probe", "key" => "k", "n" => 1},
      %{"cmd" => "batch", "queue" => "q", "n" => 1, "depth" => 1, "payload" => "p"},
      %{"cmd" => "disconnect"}
    ]

    for r <- reqs do
      assert {"invalid", m} = error_kind(st, Map.merge(r, %{"seq" => 1, "session" => "nobody"}))
      assert m =~ "nobody", "#{r["cmd"]}: #{m}"
    end
  end

  test "bad arguments are invalid before anything else", %{state: st} do
    base = %{"seq" => 1, "session" => "w1"}

    bad = [
      %{"cmd" => "enqueue", "queue" => "bad queue", "payload" => "p", "delay_ms" => 0},
      %{"cmd" => "enqueue", "queue" => "q", "payload" => 5, "delay_ms" => 0},
      %{"cmd" => "enqueue", "queue" => "q", "delay_ms" => 0},
      %{"cmd" => "enqueue", "queue" => "q", "payload" => "p", "delay_ms" => 1.5},
      %{"cmd" => "claim", "queue" => "q", "lease_ms" => -1},
      %{"cmd" => "claim", "queue" => "q", "lease_ms" => "5"},
      %{"cmd" => "complete", "queue" => "q", "id" => "x", "attempts" => 1},
      %{"cmd" => "complete", "queue" => "q", "id" => "j0000000000000001", "attempts" => 2_147_483_648},
      %{"cmd" => "retry", "queue" => "q", "id" => "j0000000000000001", "attempts" => 1, "backoff_ms" => 0,
        "max_attempts" => 0},
      %{"cmd" => "promote", "queue" => "q", "limit" => -1},
      %{"cmd" => "reap", "queue" => "q", "max_attempts" => 1, "limit" => 2_147_483_648},
      %{"cmd" => "browse", "queue" => "q", "offset" => -1, "limit" => 1},
      %{"cmd" => "pipeline_probe", "key" => "emq:x", "n" => 1},
      %{"cmd" => "pipeline_probe", "key" => "k", "n" => 0},
      %{"cmd" => "pipeline_probe", "key" => "k", "n" => 1_000_001},
      %{"cmd" => "batch", "queue" => "q", "n" => 10_000_001, "depth" => 1, "payload" => "p"},
      %{"cmd" => "batch", "queue" => "q", "n" => 1, "depth" => 100_001, "payload" => "p"},
      %{"cmd" => "batch", "queue" => "q", "n" => 1, "depth" => 1, "payload" => "p", "queues" => ["r"]},
      %{"cmd" => "batch", "queue" => "q", "n" => 1, "depth" => 1, "payload" => "p", "queues" => nil},
      %{"cmd" => "connect", "url" => "redisx://h:1"},
      %{"cmd" => "connect", "url" => "redis://h:1", "ca_file" => "/etc/hostname"},
      %{"cmd" => "connect", "url" => "rediss://h:1", "ca_file" => "/nonexistent/ca.pem"},
      %{"cmd" => "connect", "url" => "rediss://h:1", "ca_file" => 5},
      %{"cmd" => "connect", "url" => "unix:///tmp/x"},
      %{"cmd" => "connect", "url" => "redis://h:1/x", "cluster" => true},
      %{"cmd" => "connect", "url" => "redis://h:1", "cluster" => "yes"},
      %{"cmd" => "connect"},
      %{"cmd" => "connect", "session" => "", "url" => "redis://h:1"},
      %{"cmd" => "disconnect", "session" => 5}
    ]

    for r <- bad do
      assert {"invalid", _} = error_kind(st, Map.merge(base, r)), inspect(r)
    end
  end

  test "a cluster url may name any database (R8.5): it is dialled, not refused as invalid", %{state: st} do
    # a port nothing listens on: the connect gets as far as dialling the seed, so kind engine
    {:ok, sock} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
    {:ok, port} = :inet.port(sock)
    :gen_tcp.close(sock)

    for db <- ["/2", "/9", "/16", "/0", ""] do
      {resp, _} = call(st, %{"seq" => 1, "cmd" => "connect", "session" => "w1", "url" => "redis://127.0.0.1:#{port}#{db}", "cluster" => true})
      assert resp["error"]["kind"] == "engine", "#{db}: #{inspect(resp)}"
    end
  end

  test "a refused connect leaves no session behind", %{state: st} do
    {_, st2} = call(st, %{"seq" => 1, "cmd" => "connect", "session" => "w1", "url" => "unix:///tmp/x"})
    assert st2.sessions == %{}
  end

  test "a connect that cannot reach the engine is kind engine", %{state: st} do
    # a port nothing listens on (bound, then closed)
    {:ok, sock} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
    {:ok, port} = :inet.port(sock)
    :gen_tcp.close(sock)
    {resp, st2} = call(st, %{"seq" => 1, "cmd" => "connect", "session" => "w1", "url" => "redis://127.0.0.1:#{port}/0"})
    assert resp["error"]["kind"] == "engine"
    assert st2.sessions == %{}
  end

  test "a reply over 16 MiB is kind internal naming its size (R5.11, R5.6)" do
    fits = String.duplicate("x", Wire.max_line() - byte_size(~s({"ok":"","seq":1})))
    line = IO.iodata_to_binary(Wire.encode(1, {:ok, fits}))
    assert byte_size(line) - 1 == Wire.max_line()
    {:ok, over} = JSON.decode(IO.iodata_to_binary(Wire.encode(1, {:ok, fits <> "x"})))
    assert over["error"]["kind"] == "internal"
    assert over["error"]["message"] =~ "16777217-byte line"
  end
end
