defmodule EchoMQ.TLSTest do
  @moduledoc """
  SPEC §10 (R10.1-R10.4) through the wire, offline: a CA and certificates made here with
  `:public_key.pkix_test_data/1`, and a small TLS server on loopback in this file that records
  what reaches it and answers the fence read. Checks that `ca_file` is validated before anything
  is dialled, that a rediss:// connect speaks TLS and verifies the chain against `ca_file` only
  and the host name, and that a refused certificate is kind `engine` with nothing sent.
  """
  use ExUnit.Case, async: false
  alias EchoMQ.Wire
  import EchoMQ.TestHelp, only: [call: 2]

  @key {:namedCurve, :secp256r1}

  setup_all do
    {:ok, _} = Application.ensure_all_started(:ssl)
    tmp = Path.join(System.tmp_dir!(), "emq-elixir-tls-#{System.unique_integer([:positive])}")
    File.mkdir_p!(tmp)
    on_exit(fn -> File.rm_rf(tmp) end)

    good = chain("localhost")
    other_name = chain("other.invalid")
    # a second, unrelated CA (the root of another chain)
    stranger = chain("localhost")

    ca = Path.join(tmp, "ca.pem")
    File.write!(ca, pem(good.client[:cacerts]))
    other_ca = Path.join(tmp, "other-ca.pem")
    File.write!(other_ca, pem(stranger.client[:cacerts]))
    not_pem = Path.join(tmp, "not-pem.pem")
    File.write!(not_pem, "this is no certificate\n")
    key_only = Path.join(tmp, "key-only.pem")
    File.write!(key_only, :public_key.pem_encode([{:ECPrivateKey, "notakey", :not_encrypted}]))

    %{
      state: Wire.new(EchoMQ.TestHelp.bundle()),
      good: good,
      other_name: other_name,
      ca: ca,
      other_ca: other_ca,
      not_pem: not_pem,
      key_only: key_only,
      tmp: tmp
    }
  end

  # A server chain (root -> peer naming `host` in its subjectAltName, no IP) and its client config.
  defp chain(host) do
    san = {:Extension, {2, 5, 29, 17}, false, [dNSName: String.to_charlist(host)]}

    data =
      :public_key.pkix_test_data(%{
        server_chain: %{root: [key: @key], intermediates: [], peer: [key: @key, extensions: [san]]},
        client_chain: %{root: [key: @key], intermediates: [], peer: [key: @key]}
      })

    %{server: data.server_config, client: data.client_config}
  end

  defp pem(ders), do: :public_key.pem_encode(for d <- ders, do: {:Certificate, d, :not_encrypted})

  # A plain TCP listener on loopback: any connection attempt to it is seen.
  defp tcp_listener do
    {:ok, l} = :gen_tcp.listen(0, [:binary, ip: {127, 0, 0, 1}, active: false])
    {:ok, port} = :inet.port(l)
    {l, port}
  end

  # A TLS server on loopback for one connection: reports {:first_byte, b}, {:handshake, result},
  # {:request, bytes}; answers the fence read with protocol 1 and this bundle's digest.
  defp tls_server(server_config) do
    parent = self()
    {:ok, l} = :gen_tcp.listen(0, [:binary, ip: {127, 0, 0, 1}, active: false])
    {:ok, port} = :inet.port(l)

    pid =
      spawn_link(fn ->
        {:ok, tcp} = :gen_tcp.accept(l, 10_000)
        {:ok, <<b>>} = :gen_tcp.recv(tcp, 1, 10_000)
        send(parent, {:first_byte, b})
        # hand the byte back: the TLS layer reads the whole record
        :ok = :gen_tcp.unrecv(tcp, <<b>>)

        case :ssl.handshake(tcp, server_config ++ [log_level: :none], 10_000) do
          {:ok, s} ->
            send(parent, {:handshake, :ok})
            serve(parent, s)

          {:error, r} ->
            send(parent, {:handshake, {:error, r}})
        end
      end)

    {pid, port, l}
  end

  defp serve(parent, s) do
    case :ssl.recv(s, 0, 10_000) do
      {:ok, data} ->
        send(parent, {:request, data})
        b = EchoMQ.TestHelp.bundle()

        if data =~ "HMGET" do
          :ssl.send(s, [
            "*3\r\n",
            for(v <- [b.protocol, b.version, b.digest], do: ["$", "#{byte_size(v)}", "\r\n", v, "\r\n"])
          ])
        end

        serve(parent, s)

      {:error, _} ->
        :ok
    end
  end

  defp assert_no_connection(l) do
    assert {:error, :timeout} = :gen_tcp.accept(l, 300), "the connector dialled"
    :gen_tcp.close(l)
  end

  test "R10.1: rediss:// is a url; ca_file is read into the CAs to trust", ctx do
    u = EchoMQ.Validate.url("rediss://:pw@localhost:6380/2")
    assert u == %{host: "localhost", port: 6380, user: nil, password: "pw", db: 2, tls: true}
    ders = EchoMQ.Validate.ca_file(%{"ca_file" => ctx.ca}, u)
    assert ders == ctx.good.client[:cacerts]
    assert EchoMQ.Validate.ca_file(%{}, u) == nil
  end

  test "R10.1: ca_file with redis:// is invalid, nothing dialled", %{state: st, ca: ca} do
    {l, port} = tcp_listener()
    req = %{"seq" => 1, "cmd" => "connect", "session" => "w1", "url" => "redis://:pw@127.0.0.1:#{port}/0", "ca_file" => ca}
    {resp, st2} = call(st, req)
    assert resp["error"]["kind"] == "invalid"
    assert resp["error"]["message"] =~ "rediss://"
    assert st2.sessions == %{}
    assert_no_connection(l)
  end

  test "R10.1: a ca_file that cannot be read or holds no certificate is invalid, nothing dialled", ctx do
    for {path, why} <- [
          {Path.join(ctx.tmp, "missing.pem"), "cannot be read"},
          {ctx.tmp, "cannot be read"},
          {ctx.not_pem, "no PEM certificate"},
          {ctx.key_only, "no PEM certificate"},
          {"", "non-empty"},
          {5, "must be a string"}
        ] do
      {l, port} = tcp_listener()
      req = %{"seq" => 1, "cmd" => "connect", "session" => "w1", "url" => "rediss://:pw@localhost:#{port}/0", "ca_file" => path}
      {resp, st2} = call(ctx.state, req)
      assert resp["error"]["kind"] == "invalid", inspect({path, resp})
      assert resp["error"]["message"] =~ why
      assert st2.sessions == %{}
      assert_no_connection(l)
    end
  end

  test "R10.2-R10.4: rediss:// with ca_file speaks TLS from the first byte, verifies, reads the fence", ctx do
    {_pid, port, l} = tls_server(ctx.good.server)
    req = %{"seq" => 1, "cmd" => "connect", "session" => "w1", "url" => "rediss://localhost:#{port}/0", "ca_file" => ctx.ca}
    {resp, st2} = call(ctx.state, req)
    assert_receive {:first_byte, 0x16}, 5_000
    assert_receive {:handshake, :ok}, 5_000
    assert_receive {:request, data}, 5_000
    assert data =~ "HMGET"
    assert resp == %{"seq" => 1, "ok" => %{}}
    assert Map.has_key?(st2.sessions, "w1")
    {resp, _} = call(st2, %{"seq" => 2, "cmd" => "disconnect", "session" => "w1"})
    assert resp["ok"] == %{}
    :gen_tcp.close(l)
  end

  test "R10.3: a certificate of a CA not in ca_file is refused: kind engine, nothing sent", ctx do
    {_pid, port, l} = tls_server(ctx.good.server)
    req = %{"seq" => 1, "cmd" => "connect", "session" => "w1", "url" => "rediss://localhost:#{port}/0", "ca_file" => ctx.other_ca}
    {resp, st2} = call(ctx.state, req)
    assert resp["error"]["kind"] == "engine"
    assert resp["error"]["message"] =~ "unknown_ca"
    assert_receive {:first_byte, 0x16}, 5_000
    assert_receive {:handshake, {:error, _}}, 5_000
    refute_receive {:request, _}, 200
    assert st2.sessions == %{}
    :gen_tcp.close(l)
  end

  test "R10.4: a certificate of the right CA for another name is refused: kind engine, nothing sent", ctx do
    ca = Path.join(ctx.tmp, "other-name-ca.pem")
    File.write!(ca, pem(ctx.other_name.client[:cacerts]))
    {_pid, port, l} = tls_server(ctx.other_name.server)
    req = %{"seq" => 1, "cmd" => "connect", "session" => "w1", "url" => "rediss://localhost:#{port}/0", "ca_file" => ca}
    {resp, st2} = call(ctx.state, req)
    assert resp["error"]["kind"] == "engine"
    assert resp["error"]["message"] =~ "hostname_check_failed"
    assert_receive {:handshake, {:error, _}}, 5_000
    refute_receive {:request, _}, 200
    assert st2.sessions == %{}
    :gen_tcp.close(l)
  end

  test "R10.4: connecting by address to a certificate that names a host is refused", ctx do
    {_pid, port, l} = tls_server(ctx.good.server)
    req = %{"seq" => 1, "cmd" => "connect", "session" => "w1", "url" => "rediss://127.0.0.1:#{port}/0", "ca_file" => ctx.ca}
    {resp, _} = call(ctx.state, req)
    assert resp["error"]["kind"] == "engine"
    assert resp["error"]["message"] =~ "hostname_check_failed"
    refute_receive {:request, _}, 200
    :gen_tcp.close(l)
  end
end
