defmodule EchoMQ.FakeNode do
  @moduledoc """
  A small RESP server on loopback for the Sentinel and cluster tests (plain TCP, or TLS with a
  server config; loaded by `test_helper.exs`, so every test file may use it): every command it
  reads is reported to the test process as `{:cmd, name, conn, [arg]}`, every connection's end as
  `{:closed, name, conn}`; the reply comes from `handler.(cmd)`: `{:reply, value}`, `:silent`
  (read, never answer) or `:close`.
  """

  def start(name, handler, tls \\ nil) do
    owner = self()

    {mod, l} =
      case tls do
        nil ->
          {:ok, l} = :gen_tcp.listen(0, [:binary, ip: {127, 0, 0, 1}, active: false, reuseaddr: true])
          {:gen_tcp, l}

        cfg ->
          {:ok, l} = :ssl.listen(0, [:binary, ip: {127, 0, 0, 1}, active: false, reuseaddr: true] ++ cfg)
          {:ssl, l}
      end

    {:ok, {_, port}} = if mod == :ssl, do: :ssl.sockname(l), else: :inet.sockname(l)
    spawn_link(fn -> accept(mod, l, owner, name, handler) end)
    port
  end

  @doc "A port nothing listens on: every connection is refused."
  def refusing do
    {:ok, l} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
    {:ok, p} = :inet.port(l)
    :gen_tcp.close(l)
    p
  end

  defp accept(:gen_tcp, l, owner, name, handler) do
    {:ok, c} = :gen_tcp.accept(l)
    pid = spawn(fn -> serve(:gen_tcp, c, owner, name, handler) end)
    :ok = :gen_tcp.controlling_process(c, pid)
    send(pid, :go)
    accept(:gen_tcp, l, owner, name, handler)
  end

  defp accept(:ssl, l, owner, name, handler) do
    {:ok, t} = :ssl.transport_accept(l)

    pid =
      spawn(fn ->
        receive do
          :go -> :ok
        end

        case :ssl.handshake(t, 5_000) do
          {:ok, c} -> loop(:ssl, c, owner, name, handler, make_ref(), "")
          {:error, r} -> send(owner, {:handshake_failed, name, r})
        end
      end)

    :ok = :ssl.controlling_process(t, pid)
    send(pid, :go)
    accept(:ssl, l, owner, name, handler)
  end

  defp serve(mod, c, owner, name, handler) do
    receive do
      :go -> :ok
    end

    loop(mod, c, owner, name, handler, make_ref(), "")
  end

  defp loop(mod, c, owner, name, handler, conn, buf) do
    case mod.recv(c, 0) do
      {:ok, data} -> commands(mod, c, owner, name, handler, conn, buf <> data)
      {:error, _} -> send(owner, {:closed, name, conn})
    end
  end

  defp commands(mod, c, owner, name, handler, conn, buf) do
    case parse(buf) do
      {:ok, cmd, rest} ->
        send(owner, {:cmd, name, conn, cmd})

        case handler.(cmd) do
          {:reply, v} ->
            mod.send(c, enc(v))
            commands(mod, c, owner, name, handler, conn, rest)

          :silent ->
            commands(mod, c, owner, name, handler, conn, rest)

          :close ->
            mod.close(c)
            send(owner, {:closed, name, conn})
        end

      :more ->
        loop(mod, c, owner, name, handler, conn, buf)
    end
  end

  defp parse("*" <> rest) do
    case :binary.split(rest, "\r\n") do
      [n, rest] -> bulks(String.to_integer(n), rest, [])
      _ -> :more
    end
  end

  defp parse(_), do: :more

  defp bulks(0, rest, acc), do: {:ok, Enum.reverse(acc), rest}

  defp bulks(n, "$" <> rest, acc) do
    with [len, rest] <- :binary.split(rest, "\r\n"),
         len = String.to_integer(len),
         <<b::binary-size(len), "\r\n", rest::binary>> <- rest do
      bulks(n - 1, rest, [b | acc])
    else
      _ -> :more
    end
  end

  defp bulks(_, _, _), do: :more

  @doc """
  Every `{:cmd, ...}` / `{:closed, ...}` report so far (after `wait` ms for the last to arrive), in
  order, as `{name, conn, cmd | :closed}`.
  """
  def log(wait \\ 100) do
    Process.sleep(wait)
    drain([])
  end

  defp drain(acc) do
    receive do
      {:cmd, n, c, cmd} -> drain([{n, c, cmd} | acc])
      {:closed, n, c} -> drain([{n, c, :closed} | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end

  @doc "The commands `name` received in `log`, in order, over all its connections."
  def cmds(log, name), do: for({^name, _, cmd} <- log, cmd != :closed, do: cmd)

  def enc(nil), do: "$-1\r\n"
  def enc({:simple, s}), do: "+#{s}\r\n"
  def enc({:err, m}), do: "-#{m}\r\n"
  def enc(i) when is_integer(i), do: ":#{i}\r\n"
  def enc(b) when is_binary(b), do: "$#{byte_size(b)}\r\n#{b}\r\n"
  def enc(l) when is_list(l), do: ["*#{length(l)}\r\n" | Enum.map(l, &enc/1)]
end
