defmodule EchoMQ.Validate do
  @moduledoc """
  Argument validation (SPEC §4, §7): every check runs before a byte is sent. A failure throws
  `{:invalid, message}`, which the wire turns into kind `invalid`.
  """

  @max_ms 1_000_000_000_000
  @max_i32 2_147_483_647

  def max_ms, do: @max_ms
  def max_i32, do: @max_i32

  def fail(msg), do: throw({:invalid, msg})

  defp fetch(req, field) do
    case Map.fetch(req, field) do
      {:ok, v} -> v
      :error -> fail("missing field #{field}")
    end
  end

  @doc "A JSON integer within lo..=hi (R4.1-R4.6). Strings, fractions, booleans are refused."
  def int(req, field, lo, hi) do
    case fetch(req, field) do
      v when is_integer(v) and v >= lo and v <= hi -> v
      v when is_integer(v) -> fail("#{field} must be in #{lo}..=#{hi}, got #{v}")
      {:number, text} -> fail("#{field} must be an integer, got #{text}")
      v -> fail("#{field} must be an integer, got #{describe(v)}")
    end
  end

  def ms(req, field), do: int(req, field, 0, @max_ms)

  def string(req, field) do
    case fetch(req, field) do
      v when is_binary(v) -> v
      v -> fail("#{field} must be a string, got #{describe(v)}")
    end
  end

  @doc "A session name: a non-empty string (SPEC §7)."
  def session_name(req) do
    case string(req, "session") do
      "" -> fail("session must be a non-empty string")
      s -> s
    end
  end

  @doc "R1.1: 1 to 128 characters of [A-Za-z0-9._-]."
  def queue_name(q) when is_binary(q) do
    if byte_size(q) in 1..128 and valid_queue_chars?(q),
      do: q,
      else: fail("queue name #{inspect(q)} must be 1-128 chars of [A-Za-z0-9._-]")
  end

  def queue_name(q), do: fail("queue name must be a string, got #{describe(q)}")

  defp valid_queue_chars?(<<>>), do: true

  defp valid_queue_chars?(<<c, r::binary>>)
       when c in ?a..?z or c in ?A..?Z or c in ?0..?9 or c in [?., ?_, ?-],
       do: valid_queue_chars?(r)

  defp valid_queue_chars?(_), do: false

  def queue(req), do: queue_name(fetch(req, "queue"))

  @doc "R4.5: ^j[0-9]{16}$."
  def job_id(req) do
    case fetch(req, "id") do
      <<?j, digits::binary-size(16)>> = id ->
        if digits =~ ~r/\A[0-9]{16}\z/, do: id, else: fail("id #{inspect(id)} must match ^j[0-9]{16}$")

      v when is_binary(v) ->
        fail("id #{inspect(v)} must match ^j[0-9]{16}$")

      v ->
        fail("id must be a string, got #{describe(v)}")
    end
  end

  @doc "R4.7: a non-empty key outside EchoMQ's key space (the seam's case-sensitive prefix test)."
  def probe_key(req) do
    case string(req, "key") do
      "" ->
        fail("key must be non-empty")

      k ->
        if EchoMQ.Engine.echomq_key?(k),
          do: fail("key #{inspect(k)} is in EchoMQ's key space, which probes may not touch"),
          else: k
    end
  end

  @doc "R4.12: optional `queues` (absent, or a list: `null` is invalid), 1 to 64 valid names, `queue` = queues[0]."
  def batch_queues(req, queue) do
    case Map.fetch(req, "queues") do
      :error ->
        [queue]

      {:ok, list} when is_list(list) and length(list) in 1..64 ->
        qs = Enum.map(list, &queue_name/1)

        if hd(qs) == queue,
          do: qs,
          else: fail("queue #{inspect(queue)} must equal queues[0] #{inspect(hd(qs))}")

      {:ok, list} when is_list(list) ->
        fail("queues must hold 1 to 64 queue names, got #{length(list)}")

      {:ok, v} ->
        fail("queues must be a list, got #{describe(v)}")
    end
  end

  def optional_bool(req, field) do
    case Map.get(req, field) do
      nil -> false
      b when is_boolean(b) -> b
      v -> fail("#{field} must be a boolean, got #{describe(v)}")
    end
  end

  @doc """
  A connect url: `redis://[[user]:password@]host[:port][/db]`, or `rediss://` with the same rest
  over TLS (SPEC §5, §10 R10.1). Every other scheme is refused. Returns
  %{host, port, user, password, db, tls}.
  """
  def url(u) when is_binary(u) do
    bad = fn why ->
      fail("url #{inspect(redact(u))} #{why}; expected redis://[:password@]host:port[/db] or rediss://...")
    end

    {tls, rest} =
      case :binary.split(u, "://") do
        [scheme, rest] ->
          case String.downcase(scheme) do
            "redis" -> {false, rest}
            "rediss" -> {true, rest}
            _ -> bad.("has another scheme")
          end

        _ ->
          bad.("has another scheme")
      end

    if String.contains?(rest, ["?", "#"]), do: bad.("has a query or fragment")

    {authority, path} =
      case :binary.split(rest, "/") do
        [a] -> {a, ""}
        [a, p] -> {a, p}
      end

    {userinfo, hostport} =
      case :binary.matches(authority, "@") do
        [] ->
          {nil, authority}

        ms ->
          {pos, 1} = List.last(ms)
          <<ui::binary-size(pos), ?@, hp::binary>> = authority
          {ui, hp}
      end

    {user, password} =
      case userinfo do
        nil ->
          {nil, nil}

        ui ->
          case :binary.split(ui, ":") do
            [p] -> {nil, decode(p, bad)}
            ["", p] -> {nil, decode(p, bad)}
            [us, p] -> {decode(us, bad), decode(p, bad)}
          end
      end

    {host, port} = host_port(hostport, bad)

    db =
      case path do
        "" -> 0
        # any decimal integer: whether the engine has that database is the engine's to say, at
        # `SELECT` (R5.12, R8.5); the client never refuses a number itself
        d -> if d =~ ~r/\A[0-9]+\z/, do: String.to_integer(d), else: bad.("has a bad database")
      end

    %{host: host, port: port, user: user, password: if(password == "", do: nil, else: password), db: db, tls: tls}
  end

  def url(v), do: fail("url must be a string, got #{describe(v)}")

  @doc """
  R10.1: `connect`'s optional `ca_file`, checked before anything is dialled. Absent (or null):
  nil. With a `redis://` url, or a file that cannot be read or holds no PEM certificate: invalid.
  Otherwise the DER certificates it holds, the only CAs the session will trust.
  """
  def ca_file(req, url) do
    case Map.get(req, "ca_file") do
      nil ->
        nil

      path when is_binary(path) ->
        if not url.tls, do: fail("ca_file needs a rediss:// url (TLS); the url is redis://")
        if path == "", do: fail("ca_file must be a non-empty path")

        bin =
          case File.read(path) do
            {:ok, bin} -> bin
            {:error, r} -> fail("ca_file #{inspect(path)} cannot be read: #{:file.format_error(r)}")
          end

        ders =
          try do
            for {:Certificate, der, :not_encrypted} <- :public_key.pem_decode(bin), do: der
          rescue
            _ -> []
          catch
            _, _ -> []
          end

        if ders == [], do: fail("ca_file #{inspect(path)} holds no PEM certificate")
        ders

      v ->
        fail("ca_file must be a string (a path), got #{describe(v)}")
    end
  end

  @doc """
  R11.1: `connect`'s optional `sentinel` (absent or null: nil), checked before anything is
  dialled: an object with `name` (a non-empty string, the name the Sentinels monitor the primary
  by) and `nodes` (a non-empty list of `host:port` strings, port 1..65535, `[v6]:port` for an IPv6
  address), not with `"cluster": true`. Returns `%{name, nodes: [{host, port}]}`.
  """
  def sentinel(req, cluster) do
    case Map.get(req, "sentinel") do
      nil ->
        nil

      %{} = m ->
        if cluster, do: fail(~s(sentinel cannot go with "cluster": true))

        name =
          case Map.get(m, "name") do
            n when is_binary(n) and n != "" -> n
            "" -> fail("sentinel.name must be a non-empty string")
            nil -> fail("missing field sentinel.name")
            v -> fail("sentinel.name must be a string, got #{describe(v)}")
          end

        nodes =
          case Map.get(m, "nodes") do
            [_ | _] = l -> Enum.map(l, &sentinel_node/1)
            [] -> fail("sentinel.nodes must name at least one Sentinel")
            nil -> fail("missing field sentinel.nodes")
            v -> fail("sentinel.nodes must be a list of host:port strings, got #{describe(v)}")
          end

        %{name: name, nodes: nodes}

      v ->
        fail("sentinel must be an object or null, got #{describe(v)}")
    end
  end

  defp sentinel_node(n) when is_binary(n) do
    bad = fn why -> fail("sentinel node #{inspect(n)} #{why}; expected host:port") end

    case n do
      "[" <> rest ->
        case :binary.split(rest, "]:") do
          [h, p] when h != "" -> {h, port(p, bad)}
          _ -> bad.("is not [address]:port")
        end

      _ ->
        case :binary.split(n, ":") do
          [h, p] when h != "" -> {h, port(p, bad)}
          [_] -> bad.("has no port")
          _ -> bad.("is not host:port")
        end
    end
  end

  defp sentinel_node(v), do: fail("sentinel node must be a string (host:port), got #{describe(v)}")

  defp decode(s, bad) do
    URI.decode(s)
  rescue
    _ -> bad.("has a bad percent-escape")
  end

  defp host_port("[" <> rest, bad) do
    case :binary.split(rest, "]") do
      [h, ""] when h != "" -> {h, 6379}
      [h, ":" <> p] when h != "" -> {h, port(p, bad)}
      _ -> bad.("has a bad host")
    end
  end

  defp host_port(hp, bad) do
    case :binary.split(hp, ":") do
      [""] -> bad.("has no host")
      [h] -> {h, 6379}
      ["", _] -> bad.("has no host")
      [h, p] -> {h, port(p, bad)}
    end
  end

  defp port(p, bad) do
    if p =~ ~r/\A[0-9]{1,5}\z/ and String.to_integer(p) in 1..65535,
      do: String.to_integer(p),
      else: bad.("has a bad port")
  end

  defp redact(u), do: Regex.replace(~r{//([^@/]*)@}, u, "//***@")

  def describe(nil), do: "null"
  def describe(true), do: "true"
  def describe(false), do: "false"
  def describe({:number, t}), do: t
  def describe(v) when is_binary(v), do: inspect(v)
  def describe(v) when is_list(v), do: "an array"
  def describe(v) when is_map(v), do: "an object"
  def describe(v), do: inspect(v)
end
