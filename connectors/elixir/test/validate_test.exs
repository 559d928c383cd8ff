defmodule EchoMQ.ValidateTest do
  use ExUnit.Case, async: true
  alias EchoMQ.Validate, as: V

  defp invalid(fun) do
    try do
      fun.()
      flunk("expected {:invalid, _}")
    catch
      {:invalid, msg} -> msg
    end
  end

  test "R1.1 queue names" do
    assert V.queue_name("orders") == "orders"
    assert V.queue_name("A-z_0.9") == "A-z_0.9"
    assert V.queue_name(String.duplicate("q", 128))

    for bad <- ["", "bad queue", "a{b}", "a:b", "é", String.duplicate("q", 129), "tab\t", "new\nline"] do
      assert invalid(fn -> V.queue_name(bad) end) =~ "queue name"
    end

    assert invalid(fn -> V.queue_name(5) end) =~ "string"
    assert invalid(fn -> V.queue_name(nil) end) =~ "string"
  end

  test "R4.1 milliseconds in 0..=10^12" do
    assert V.ms(%{"lease_ms" => 0}, "lease_ms") == 0
    assert V.ms(%{"lease_ms" => 1_000_000_000_000}, "lease_ms") == 1_000_000_000_000
    assert invalid(fn -> V.ms(%{"lease_ms" => 1_000_000_000_001}, "lease_ms") end) =~ "0..=1000000000000"
    assert invalid(fn -> V.ms(%{"lease_ms" => -1}, "lease_ms") end) =~ "got -1"
  end

  test "numbers must be JSON integers" do
    for v <- ["5", {:number, "5.0"}, {:number, "1e3"}, true, nil, [1], %{}] do
      assert invalid(fn -> V.int(%{"n" => v}, "n", 0, 10) end) =~ "must be an integer"
    end

    assert invalid(fn -> V.int(%{}, "n", 0, 10) end) =~ "missing field n"
    assert invalid(fn -> V.int(%{"n" => 10 ** 30}, "n", 0, 10) end) =~ "0..=10"
  end

  test "R4.5 job ids" do
    assert V.job_id(%{"id" => "j0000000000000001"}) == "j0000000000000001"

    for bad <- ["j1", "j00000000000000001", "J0000000000000001", "j000000000000000a", "", " j0000000000000001"] do
      assert invalid(fn -> V.job_id(%{"id" => bad}) end) =~ "must match"
    end

    assert invalid(fn -> V.job_id(%{"id" => 1}) end) =~ "string"
  end

  test "R4.7 probe keys: non-empty, not under emq: (case-sensitive)" do
    assert V.probe_key(%{"key" => "probe"}) == "probe"
    assert V.probe_key(%{"key" => "EMQ:x"}) == "EMQ:x"
    assert V.probe_key(%{"key" => "emqx"}) == "emqx"
    assert invalid(fn -> V.probe_key(%{"key" => ""}) end) =~ "non-empty"
    assert invalid(fn -> V.probe_key(%{"key" => "emq:x"}) end) =~ "key space"
  end

  test "R4.12 batch queues" do
    assert V.batch_queues(%{}, "a") == ["a"]
    assert V.batch_queues(%{"queues" => ["a", "b", "a"]}, "a") == ["a", "b", "a"]
    assert invalid(fn -> V.batch_queues(%{"queues" => ["b", "a"]}, "a") end) =~ "must equal queues[0]"
    assert invalid(fn -> V.batch_queues(%{"queues" => []}, "a") end) =~ "1 to 64"
    assert invalid(fn -> V.batch_queues(%{"queues" => List.duplicate("a", 65)}, "a") end) =~ "1 to 64"
    assert invalid(fn -> V.batch_queues(%{"queues" => ["a", "bad q"]}, "a") end) =~ "queue name"
    assert invalid(fn -> V.batch_queues(%{"queues" => "a"}, "a") end) =~ "list"
    assert invalid(fn -> V.batch_queues(%{"queues" => nil}, "a") end) =~ "list"
  end

  test "urls: redis:// or rediss://, password, host, port, db" do
    assert V.url("redis://:pw@127.0.0.1:6379/3") ==
             %{host: "127.0.0.1", port: 6379, user: nil, password: "pw", db: 3, tls: false}

    assert V.url("redis://localhost:7000") == %{host: "localhost", port: 7000, user: nil, password: nil, db: 0, tls: false}
    assert V.url("redis://h:1/") == %{host: "h", port: 1, user: nil, password: nil, db: 0, tls: false}
    assert V.url("rediss://:pw@localhost:6380/4") ==
             %{host: "localhost", port: 6380, user: nil, password: "pw", db: 4, tls: true}

    assert V.url("REDISS://h:1").tls
    assert V.url("redis://u:p%40ss@h:2/0").password == "p@ss"
    assert V.url("redis://u:p%40ss@h:2/0").user == "u"
    assert V.url("redis://:a@b@h:2").password == "a@b"
    assert V.url("redis://[::1]:6380/1") == %{host: "::1", port: 6380, user: nil, password: nil, db: 1, tls: false}
    # any decimal database: the engine, not the client, says which it has (R5.12, R8.5)
    assert V.url("redis://h:1/16").db == 16
    assert V.url("redis://h:1/9999999999").db == 9_999_999_999

    for bad <- ["redisss://h:1", "valkeys://h:1", "rediss:/h:1", "rediss://h:1/x", "unix:///tmp/s", "http://h:1", "h:1", "redis://", "redis://h:0", "redis://h:99999",
                "redis://h:1/x", "redis://h:1/1x", "redis://h:1/-1", "redis://h:1/1/2", "redis://h:1?db=2", "redis://:pw@:1", "redis://h:port"] do
      assert invalid(fn -> V.url(bad) end) =~ "url", "expected #{bad} to be refused"
    end

    assert invalid(fn -> V.url(nil) end) =~ "string"
    refute invalid(fn -> V.url("http://:secret@h:1") end) =~ "secret"
    refute invalid(fn -> V.url("rediss://:secret@h:1/x") end) =~ "secret"
  end

  test "R10.1 ca_file: only with rediss://, readable, holding a certificate; absent is nil" do
    tls = V.url("rediss://localhost:1")
    plain = V.url("redis://localhost:1")
    assert V.ca_file(%{}, tls) == nil
    assert V.ca_file(%{"ca_file" => nil}, plain) == nil
    assert invalid(fn -> V.ca_file(%{"ca_file" => "/etc/hostname"}, plain) end) =~ "rediss://"
    assert invalid(fn -> V.ca_file(%{"ca_file" => "/nonexistent/ca.pem"}, tls) end) =~ "cannot be read"
    assert invalid(fn -> V.ca_file(%{"ca_file" => "/nonexistent/ca.pem"}, plain) end) =~ "rediss://"
    assert invalid(fn -> V.ca_file(%{"ca_file" => ["a"]}, tls) end) =~ "string"
  end
end
