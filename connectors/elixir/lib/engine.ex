defmodule EchoMQ.Engine do
  @moduledoc """
  The sole raw-Redis seam (R4.15): the only module that calls the raw client (eredis) and the
  only one that knows the key schema (`emq:{q}:...`, `emq:fence`). `test/seam_test.exs` scans
  every other source file and fails if one names the client or an `emq:` key.

  eredis is started with `reconnect_sleep = :no_reconnect`: a connection that closes is gone
  (its process stops), is never reopened behind our back, and nothing queued on it is re-sent;
  see README.md for the eredis source lines. AUTH and SELECT are sent here, as RESP commands,
  not through eredis's own inline `AUTH "<password>"`.

  TLS (SPEC §10). eredis 1.2.0 has none: its `connect/1` calls `gen_tcp:connect` and every send is
  `gen_tcp:send`, with no transport option. A `rediss://` session's connections are therefore
  `EchoMQ.Engine.TLSConn` processes (below, in this file: still the seam), each an `:ssl` socket
  that answers eredis's own `{pipeline, ...}` call and parses replies with eredis's parser, so
  `:eredis.qp/3` and everything above it work unchanged. Every connection of such a session is one
  (the seed, cluster nodes, replacements): `Router` hands the session's `tls` settings to
  `open_conn/5` for each. Verification is never off: `verify: :verify_peer`, the CAs of
  `ca_file` only (else the system store), the host name checked, no session reuse, and a failed
  handshake is kind `engine`, never a plaintext retry.
  """

  alias EchoMQ.{Router, Slot}
  alias EchoMQ.Engine.TLSConn

  @fence_key "emq:fence"
  @connect_timeout 5_000

  # ------------------------------------------------------------------ the raw client

  @doc """
  Opens one connection (no fence read here: the caller does it before any verb). `tls` is nil
  (plaintext) or the session's settings from `tls_settings/1`: then the connection speaks TLS
  from its first byte (R10.2).

  `AUTH` and then `SELECT db` (when `db` is not 0) are the first commands on it, sent here as one
  RESP pipeline, on a cluster node as on one engine (R5.12, R8.5). eredis's own `Database`
  argument is not used: eredis sends that `SELECT` inline before anything else
  (`eredis_client.erl`, `connect/1`), so it would come before our `AUTH user password` and be
  refused with `NOAUTH`, and its refusal would surface as `{select_error, {unexpected_data, ...}}`
  instead of the engine's text. A refused `SELECT` (`ERR DB index is out of range`, `NOPERM`,
  `ERR SELECT is not allowed in cluster mode`) closes the connection and is returned with the
  engine's text; nothing else was sent on it.
  """
  def open_conn({host, port} = node, auth, db, tls, dl) do
    now = System.monotonic_time(:millisecond)
    t = min(@connect_timeout, max(dl - now, 1))
    # the whole open (connect, TLS handshake, AUTH/SELECT) ends by `now + t`, not each step after
    # t: a node that accepts and then never answers costs a Sentinel's share once (R11.1)
    until = now + t

    with {:ok, ip} <- resolve(host),
         {:ok, pid} <- start(ip, port, t, node, tls) do
      setup = if(auth, do: [auth], else: []) ++ if(db != 0, do: [["SELECT", db]], else: [])

      case setup == [] or raw_pipeline(pid, setup, max(until - System.monotonic_time(:millisecond), 1)) do
        true ->
          {:ok, pid}

        {:ok, replies} ->
          # the engine's own text, after the command it refused (AUTH's arguments are not shown)
          case Enum.find(Enum.zip(setup, replies), &match?({_, {:err, _}}, &1)) do
            nil ->
              {:ok, pid}

            {[cmd | _], {:err, m}} ->
              close_conn(pid)
              {:error, "#{Router.addr(node)}: #{if cmd == "SELECT", do: "SELECT #{db}", else: cmd}: #{m}"}
          end

        {:error, reason} ->
          {:error, "#{Router.addr(node)}: connection failed during AUTH/SELECT (#{describe_reason(reason)})"}
      end
    end
  end

  defp start(ip, port, t, node, nil) do
    # eredis links its client to the caller and exits through that link when it fails or its
    # socket closes: the owner must trap exits to outlive its connections.
    Process.flag(:trap_exit, true)

    case :eredis.start_link(ip, port, :undefined, '', :no_reconnect, t) do
      {:ok, pid} ->
        {:ok, pid}

      {:error, reason} ->
        flush_exit()
        {:error, "cannot connect to #{Router.addr(node)}: #{describe_reason(reason)}"}
    end
  catch
    :exit, reason -> {:error, "cannot connect to #{Router.addr(node)}: #{describe_reason(reason)}"}
  end

  defp start(ip, port, t, {host, _} = node, {:tls, base}) do
    Process.flag(:trap_exit, true)
    {:ok, addr} = :inet.parse_address(ip)

    # R10.4: the name checked is the host the connection was opened to (the url's, or the one the
    # slot map or a redirect gave). It goes out as SNI and is what OTP's ssl verifies the
    # certificate against; an IP literal is checked as an address (no SNI can carry one).
    sni =
      case :inet.parse_address(String.to_charlist(host)) do
        {:ok, _} -> []
        {:error, _} -> [server_name_indication: String.to_charlist(host)]
      end

    case TLSConn.start_link(addr, port, sni ++ base, t) do
      {:ok, pid} ->
        {:ok, pid}

      {:error, reason} ->
        flush_exit()
        {:error, "cannot connect to #{Router.addr(node)} over TLS: #{describe_reason(reason)}"}
    end
  catch
    :exit, reason -> {:error, "cannot connect to #{Router.addr(node)} over TLS: #{describe_reason(reason)}"}
  end

  @doc """
  The TLS settings of a `rediss://` session (R10.1, R10.3, R10.4): verify the peer's chain against
  `cacerts` only (the DER certificates of `ca_file`), or the system store when there is no
  `ca_file`; check the host name (OTP's ssl checks it under `verify_peer` unless SNI is
  `:disable`; `customize_hostname_check` adds the https rules for wildcards); never resume a
  session (a resumed handshake shows no certificate, and sessions of another CA must not be reused).
  Returns `{:ok, settings}` or `{:error, message}`.
  """
  def tls_settings(cacerts) do
    with {:ok, cas} <- trusted(cacerts),
         {:ok, _} <- Application.ensure_all_started(:ssl) do
      {:ok,
       {:tls,
        [
          verify: :verify_peer,
          cacerts: cas,
          customize_hostname_check: [match_fun: :public_key.pkix_verify_hostname_match_fun(:https)],
          reuse_sessions: false,
          depth: 10,
          log_level: :error
        ]}}
    else
      {:error, m} when is_binary(m) -> {:error, m}
      {:error, r} -> {:error, "cannot start TLS (the ssl application): #{inspect(r)}"}
    end
  end

  defp trusted(nil) do
    case :public_key.cacerts_get() do
      [_ | _] = cas -> {:ok, cas}
      _ -> {:error, "no ca_file and the system trust store holds no certificate"}
    end
  rescue
    e -> {:error, "no ca_file and the system trust store cannot be read: #{Exception.message(e)}"}
  catch
    _, r -> {:error, "no ca_file and the system trust store cannot be read: #{inspect(r)}"}
  end

  defp trusted([_ | _] = ders), do: {:ok, ders}

  defp flush_exit do
    receive do
      {:EXIT, _, _} -> :ok
    after
      0 -> :ok
    end
  end

  # eredis resolves a name with IPv6 first; the engines listen on IPv4 loopback, so prefer IPv4.
  defp resolve(host) do
    h = String.to_charlist(host)

    case :inet.parse_address(h) do
      {:ok, ip} ->
        {:ok, :inet.ntoa(ip)}

      {:error, _} ->
        case :inet.getaddr(h, :inet) do
          {:ok, ip} ->
            {:ok, :inet.ntoa(ip)}

          {:error, _} ->
            case :inet.getaddr(h, :inet6) do
              {:ok, ip} -> {:ok, :inet.ntoa(ip)}
              {:error, r} -> {:error, "cannot resolve #{host}: #{inspect(r)}"}
            end
        end
    end
  end

  @doc "Closes a connection at once; a late reply can never be read from it."
  def close_conn(pid) do
    Process.exit(pid, :kill)
    :ok
  end

  @doc """
  Sends `cmds` as one pipeline (one write) and waits for all their replies. A reply is a value
  (binary, list, nil) or `{:err, message}`. A connection failure or a timeout kills the
  connection and returns `{:error, reason}` (R4.16).
  """
  def raw_pipeline(pid, cmds, timeout) do
    case :eredis.qp(pid, cmds, timeout) do
      list when is_list(list) ->
        {:ok, Enum.map(list, &norm_reply/1)}

      {:error, reason} ->
        close_conn(pid)
        {:error, reason}
    end
  catch
    :exit, reason ->
      close_conn(pid)
      {:error, reason}
  end

  defp norm_reply({:ok, v}), do: norm(v)
  defp norm_reply({:error, m}) when is_binary(m), do: {:err, m}
  defp norm_reply({:error, m}), do: {:err, inspect(m)}

  @doc """
  A script call's reply as the engine sent it. eredis 1.2.0's parser (`eredis_parser:parse/2`)
  continues an error reply that a socket read cut short in state `status_continue`, and that
  continuation ends in `return_result`: the error arrives as a value,
  `"NOSCRIPT No matching script..."`. In a pipeline of 1 000 `NOSCRIPT` replies about 2% are
  cut so (G5 starts its batches on an empty script cache); a `MOVED` or a `WRONGTYPE` can be
  too. A bundle script's top-level string is an id, `stale`, `dead` or `delayed`, never an error
  code and a space, so such a value is the error it was. (Only script replies: `HGET` answers a
  payload, which may read like anything.)
  """
  def script_reply(v) when is_binary(v) do
    if Regex.match?(~r/\A[A-Z][A-Z_]+ /, v), do: {:err, v}, else: v
  end

  def script_reply(v), do: v

  defp norm(:undefined), do: nil
  defp norm(l) when is_list(l), do: Enum.map(l, &norm/1)
  defp norm(v), do: v

  def describe_reason({:timeout, _}), do: "timed out"
  def describe_reason(:timeout), do: "timed out"
  def describe_reason(:tcp_closed), do: "connection closed"
  def describe_reason(:ssl_closed), do: "connection closed"
  def describe_reason({:shutdown, r}), do: describe_reason(r)
  # OTP's ssl: {tls_alert, {unknown_ca | handshake_failure | certificate_expired | ..., text}}
  def describe_reason({:tls_alert, {alert, text}}) do
    text = text |> to_string() |> String.replace(~r/\s+/, " ") |> String.trim()

    if text =~ "CLIENT ALERT",
      do: "TLS handshake failed: the server's certificate was refused (#{alert}): #{text}",
      else: "TLS handshake failed: the server refused it (#{alert}): #{text}"
  end

  def describe_reason({:tls_alert, alert}), do: "TLS handshake failed (#{inspect(alert)})"
  def describe_reason(:no_connection), do: "no connection"
  def describe_reason({:noproc, _}), do: "connection closed"
  def describe_reason({:normal, _}), do: "connection closed"
  def describe_reason({:connection_error, r}), do: inspect(r)
  def describe_reason(r) when is_binary(r), do: r
  def describe_reason(r), do: inspect(r)

  def script_load_cmd(bundle, name) do
    %{source: src, sha: sha} = bundle.scripts[name]
    {["SCRIPT", "LOAD", src], sha}
  end

  # ------------------------------------------------------------------ the key schema

  @doc "R4.7: is `k` under EchoMQ's prefix (case-sensitive)? Probes may not touch such keys."
  def echomq_key?("emq:" <> _), do: true
  def echomq_key?(_), do: false

  defp key(q, suffix), do: "emq:{" <> q <> "}:" <> suffix
  defp root(q), do: "emq:{" <> q <> "}:job:"
  defp qslot(q), do: Slot.of_key(key(q, "pending"))

  # ------------------------------------------------------------------ sessions and the fence

  @doc """
  connect (R3.1-R3.4, R8.1, R10.1, R11.1): open (behind Sentinel: find the primary first), learn
  the slot map on a cluster, read the fence. `sentinel` is nil or `Validate.sentinel/2`'s
  `%{name, nodes}`; `cacerts` is nil or the DER certificates of `ca_file` (checked by
  `Validate.ca_file/2`).
  """
  def connect(bundle, name, url, cluster, sentinel, cacerts, dl) do
    if url.tls do
      case tls_settings(cacerts) do
        {:ok, tls} -> do_connect(bundle, name, url, cluster, sentinel, tls, dl)
        {:error, m} -> {:error, :engine, m}
      end
    else
      do_connect(bundle, name, url, cluster, sentinel, nil, dl)
    end
  end

  defp do_connect(bundle, name, url, cluster, sentinel, tls, dl) do
    auth =
      case {url.user, url.password} do
        {nil, nil} -> nil
        {nil, p} -> ["AUTH", p]
        {u, p} -> ["AUTH", u, p || ""]
      end

    # behind Sentinel the url names the first Sentinel, not a data node: the seed is found (R11.1)
    seed = if sentinel, do: nil, else: {url.host, url.port}

    s = %Router{name: name, cluster: cluster, seed: seed, auth: auth, db: url.db, tls: tls, sentinel: sentinel, bundle: bundle}

    result =
      cond do
        cluster ->
          with {:ok, s} <- Router.init_cluster(s, dl), do: read_fence(s, dl)

        sentinel ->
          with {:ok, s} <- Router.ensure_primary(s, dl), do: read_fence(s, dl)

        true ->
          with {:ok, _pid, s} <- Router.conn(s, s.seed, dl), do: read_fence(s, dl)
      end

    case result do
      {:ok, s} ->
        {:ok, s}

      {:error, k, m, s} ->
        Router.close_all(s)
        {:error, k, m}
    end
  end

  def disconnect(s), do: Router.close_all(s)

  @doc "A new connection after the first: read the fence before any verb on it (R3.1)."
  def reconnect_fence(s, dl) do
    case read_fence(s, dl) do
      {:ok, s} -> {:ok, s}
      {:error, k, m, s} -> {:error, k, m, s}
    end
  end

  defp read_fence(s, dl, installed \\ false) do
    item = %{slot: Slot.of_key(@fence_key), cmd: ["HMGET", @fence_key, "protocol", "bundle", "digest"], script: nil}

    case Router.run(s, [item], dl, fence_read: true) do
      {:ok, [[nil, _, _]], s} when not installed ->
        with {:ok, s} <- install_fence(s, dl), do: read_fence(s, dl, true)

      {:ok, [[p, b, d]], s} ->
        check_fence(s, p, b, d)

      {:ok, [{:err, m}], s} ->
        {:error, :engine, "reading the fence #{@fence_key}: #{m}", s}

      {:ok, [other], s} ->
        {:error, :engine, "reading the fence #{@fence_key}: unexpected reply #{inspect(other)}", s}

      {:error, k, m, s} ->
        {:error, k, m, s}
    end
  end

  defp check_fence(s, p, b, d) do
    bundle = s.bundle

    if p == bundle.protocol do
      if d != bundle.digest do
        IO.puts(:stderr, "echomq-elixir: warning: fence digest #{inspect(d)} (bundle #{inspect(b)}) " <>
          "differs from this connector's #{bundle.digest} (bundle #{bundle.version})")
      end

      {:ok, Router.mark_fenced(s)}
    else
      {:error, :fence,
       "fence protocol #{p || "(none)"} (bundle #{b || "(none)"}) does not match connector protocol #{bundle.protocol}",
       s}
    end
  end

  # R3.2: one HSETNX per field inside one MULTI/EXEC, on the fence's node.
  defp install_fence(s, dl) do
    b = s.bundle

    cmds = [
      ["MULTI"],
      ["HSETNX", @fence_key, "protocol", b.protocol],
      ["HSETNX", @fence_key, "bundle", b.version],
      ["HSETNX", @fence_key, "digest", b.digest],
      ["EXEC"]
    ]

    node = Router.owner(s, Slot.of_key(@fence_key))

    with {:ok, pid, s} <- Router.conn(s, node, dl) do
      case raw_pipeline(pid, cmds, max(dl - System.monotonic_time(:millisecond), 1)) do
        {:ok, ["OK", "QUEUED", "QUEUED", "QUEUED", exec]} when is_list(exec) ->
          {:ok, s}

        {:ok, replies} ->
          m = Enum.find_value(replies, inspect(replies), fn {:err, m} -> m; _ -> nil end)
          {:error, :engine, "installing the fence #{@fence_key}: #{m}", Router.after_readonly(s, replies)}

        {:error, reason} ->
          {:error, :engine, "installing the fence: connection failed (#{describe_reason(reason)})", Router.drop(s, node)}
      end
    end
  end

  # ------------------------------------------------------------------ the verbs

  defp script(s, name, q, keys, args) do
    sha = s.bundle.scripts[name].sha
    %{slot: qslot(q), script: name, cmd: ["EVALSHA", sha, length(keys) | keys ++ args]}
  end

  defp enqueue_item(s, q, payload, delay),
    do: script(s, "enqueue", q, [key(q, "pending"), key(q, "delayed"), key(q, "seq")], [root(q), payload, delay])

  defp one(s, item, dl, decode) do
    case Router.run(s, [item], dl) do
      {:ok, [{:err, m}], s} -> {:error, :engine, m, s}
      {:ok, [v], s} -> decode_with(decode, v, s)
      {:error, k, m, s} -> {:error, k, m, s}
    end
  end

  defp decode_with(decode, v, s) do
    {:ok, decode.(v), s}
  rescue
    _ -> {:error, :engine, "unexpected reply from the engine: #{inspect(v)}", s}
  end

  def enqueue(s, q, payload, delay, dl),
    do: one(s, enqueue_item(s, q, payload, delay), dl, fn id when is_binary(id) -> id end)

  def claim(s, q, lease, dl) do
    item = script(s, "claim", q, [key(q, "pending"), key(q, "active")], [root(q), lease])

    one(s, item, dl, fn
      [] -> nil
      nil -> nil
      [id, payload, att] when is_binary(id) and is_binary(payload) -> %{id: id, payload: payload, attempts: int(att)}
    end)
  end

  def complete(s, q, id, attempts, dl) do
    item = script(s, "complete", q, [key(q, "active")], [root(q), id, attempts])
    one(s, item, dl, fn v -> int(v) == 1 end)
  end

  def retry(s, q, id, attempts, backoff, max, dl) do
    item =
      script(s, "retry", q, [key(q, "active"), key(q, "delayed"), key(q, "dead")], [root(q), id, attempts, backoff, max])

    one(s, item, dl, fn v when v in ["delayed", "dead", "stale"] -> v end)
  end

  def promote(s, q, limit, dl) do
    item = script(s, "promote", q, [key(q, "delayed"), key(q, "pending")], [root(q), limit])
    one(s, item, dl, &int/1)
  end

  def reap(s, q, max, limit, dl) do
    item = script(s, "reap", q, [key(q, "active"), key(q, "pending"), key(q, "dead")], [root(q), max, limit])
    one(s, item, dl, &int/1)
  end

  def pending_size(s, q, dl) do
    one(s, %{slot: qslot(q), cmd: ["ZCARD", key(q, "pending")], script: nil}, dl, &int/1)
  end

  @doc "R2.5: ZRANGE, then HGET per id, pipelined; ids whose hash went away are left out."
  def browse(s, _q, _offset, 0, _dl), do: {:ok, [], s}

  def browse(s, q, offset, limit, dl) do
    zr = %{slot: qslot(q), cmd: ["ZRANGE", key(q, "pending"), offset, offset + limit - 1], script: nil}

    with {:ok, ids, s} <- one(s, zr, dl, fn l when is_list(l) -> l end) do
      gets = Enum.map(ids, fn id -> %{slot: qslot(q), cmd: ["HGET", root(q) <> id, "payload"], script: nil} end)

      case Router.run(s, gets, dl) do
        {:ok, payloads, s} ->
          case Enum.find(payloads, &match?({:err, _}, &1)) do
            {:err, m} ->
              {:error, :engine, m, s}

            nil ->
              jobs = for {id, p} <- Enum.zip(ids, payloads), is_binary(p), do: %{id: id, payload: p}
              {:ok, jobs, s}
          end

        {:error, k, m, s} ->
          {:error, k, m, s}
      end
    end
  end

  @doc "R4.11: n INCR of one key as one pipeline."
  def pipeline_probe(s, key, n, dl) do
    item = %{slot: Slot.of_key(key), cmd: ["INCR", key], script: nil}

    case Router.run(s, List.duplicate(item, n), dl) do
      {:ok, replies, s} ->
        case Enum.find(replies, &match?({:err, _}, &1)) do
          nil -> decode_with(fn rs -> Enum.map(rs, &int/1) end, replies, s)
          {:err, m} -> {:error, :engine, m, s}
        end

      {:error, k, m, s} ->
        {:error, k, m, s}
    end
  end

  @doc """
  R4.12: n enqueues in pipelines of `depth`, enqueue i to queues[i mod len]. Any failure makes the
  whole verb `engine` (no exact count exists); nothing is re-sent after a lost reply.
  """
  def batch(s, queues, n, depth, payload, dl) do
    cmds = queues |> Enum.map(&enqueue_item(s, &1, payload, 0)) |> List.to_tuple()
    len = tuple_size(cmds)
    batch_loop(s, cmds, len, 0, n, depth, dl)
  end

  defp batch_loop(s, _cmds, _len, done, n, _depth, _dl) when done >= n, do: {:ok, done, s}

  defp batch_loop(s, cmds, len, done, n, depth, dl) do
    last = min(n, done + depth) - 1
    items = for i <- done..last, do: elem(cmds, rem(i, len))

    case Router.run(s, items, dl) do
      {:ok, replies, s} ->
        case Enum.find(replies, &match?({:err, _}, &1)) do
          nil ->
            batch_loop(s, cmds, len, last + 1, n, depth, dl)

          {:err, m} ->
            ok = Enum.count(replies, &is_binary/1)
            {:error, :engine, "batch: an enqueue failed after #{done + ok} of #{n} landed: #{m}", s}
        end

      {:error, k, m, s} ->
        {:error, k, "batch: #{m} (#{done} enqueues confirmed before this pipeline)", s}
    end
  end

  defp int(v) when is_integer(v), do: v
  defp int(v) when is_binary(v), do: String.to_integer(v)
end

defmodule EchoMQ.Engine.TLSConn do
  @moduledoc """
  Part of the seam (R4.15): one Redis connection over OTP's `:ssl`, for `rediss://` sessions
  (SPEC §10), since eredis 1.2.0 speaks `gen_tcp` only. It mirrors eredis 1.2.0's client with
  `reconnect_sleep = :no_reconnect` (`eredis_client`): `init` connects synchronously (the TLS
  handshake included, so a refused certificate fails `start_link`), requests arrive as eredis's
  own `gen_server` call `{pipeline, [encoded command]}` (made by `:eredis.qp/3`), replies are
  parsed by `eredis_parser` and answered in order as `[{ok, V} | {error, E}]`, and a closed or
  failed socket answers every queued caller `{error, Reason}` and stops the process: it never
  reconnects and never re-sends. The socket is owned by this process, so killing it (the seam's
  `close_conn/1`) closes the connection.
  """
  use GenServer

  def start_link(addr, port, ssl_opts, timeout) do
    GenServer.start_link(__MODULE__, {addr, port, ssl_opts, timeout}, timeout: timeout + 1_000)
  end

  @impl true
  def init({addr, port, ssl_opts, timeout}) do
    # `nodelay: true` (TCP_NODELAY, as eredis's peers in Go and Python set it): without it Nagle
    # holds the first request after the handshake (AUTH) until the server ACKs the client's last
    # handshake flight (Finished), and a server with nothing to send right then (the harness's TLS
    # front) delays that ACK by Linux's ~40 ms: every rediss:// connect took ~46 ms, the handshake
    # itself ~2 ms. It is a socket option only; verification is untouched.
    opts = [:binary, active: :once, packet: :raw, send_timeout: 5_000, nodelay: true] ++ ssl_opts

    case :ssl.connect(addr, port, opts, timeout) do
      {:ok, sock} -> {:ok, %{sock: sock, parser: :eredis_parser.init(), queue: :queue.new()}}
      {:error, reason} -> {:stop, reason}
    end
  end

  @impl true
  def handle_call({:pipeline, pipeline}, from, st) do
    case :ssl.send(st.sock, pipeline) do
      :ok -> {:noreply, %{st | queue: :queue.in({length(pipeline), from, []}, st.queue)}}
      {:error, reason} -> {:reply, {:error, reason}, st}
    end
  end

  def handle_call(_other, _from, st), do: {:reply, :unknown_request, st}

  @impl true
  def handle_info({:ssl, sock, data}, %{sock: sock} = st) do
    _ = :ssl.setopts(sock, active: :once)
    {:noreply, response(data, st)}
  end

  def handle_info({:ssl_closed, sock}, %{sock: sock} = st), do: fail(:ssl_closed, st)
  def handle_info({:ssl_error, sock, reason}, %{sock: sock} = st), do: fail(reason, st)
  def handle_info(_other, st), do: {:noreply, st}

  @impl true
  def terminate(_reason, st) do
    _ = :ssl.close(st.sock)
    :ok
  end

  defp fail(reason, st) do
    st.queue |> :queue.to_list() |> Enum.each(fn {_, from, _} -> GenServer.reply(from, {:error, reason}) end)
    {:stop, :normal, %{st | queue: :queue.new()}}
  end

  defp response(data, st) do
    case :eredis_parser.parse(st.parser, data) do
      {code, value, parser} ->
        %{st | parser: parser, queue: reply({code, value}, st.queue)}

      {code, value, rest, parser} ->
        response(rest, %{st | parser: parser, queue: reply({code, value}, st.queue)})

      {:continue, parser} ->
        %{st | parser: parser}
    end
  end

  defp reply(value, queue) do
    case :queue.out(queue) do
      {{:value, {1, from, replies}}, queue} ->
        GenServer.reply(from, Enum.reverse([value | replies]))
        queue

      {{:value, {n, from, replies}}, queue} ->
        :queue.in_r({n - 1, from, [value | replies]}, queue)

      {:empty, _} ->
        # a reply nobody asked for: the connection is out of step, so it must not be used
        exit(:unexpected_reply)
    end
  end
end
