defmodule EchoMQ.Bundle do
  @moduledoc """
  The bundle (SPEC §2): the six scripts read by path, each checked against `manifest.json`
  (R2.1), the digest recomputed, claim's frozen sha1 (R2.2) checked. Any mismatch is fatal.
  """

  @order ~w(enqueue claim complete retry promote reap)
  @claim_sha "2319de1e94e21dd355032c7a25b90636b53f36cd"
  @protocol "1"

  defstruct [:dir, :version, :protocol, :digest, :fence_key, :scripts]

  @type script :: %{name: String.t(), sha: String.t(), source: binary()}
  @type t :: %__MODULE__{}

  def order, do: @order
  def protocol, do: @protocol

  @doc "Finds the bundle: `--bundle DIR`, else `$EMQ_BUNDLE_DIR`, else the given default."
  def locate(argv, default) do
    case argv do
      ["--bundle", dir | _] -> dir
      _ -> System.get_env("EMQ_BUNDLE_DIR") || default
    end
  end

  @spec load(String.t()) :: {:ok, t()} | {:error, String.t()}
  def load(dir) do
    with {:ok, raw} <- read(Path.join(dir, "manifest.json")),
         {:ok, m} <- manifest(raw),
         {:ok, scripts} <- scripts(dir, m["scripts"]),
         :ok <- check_digest(m, scripts),
         :ok <- check_claim(scripts) do
      {:ok,
       %__MODULE__{
         dir: dir,
         version: m["bundle"],
         protocol: to_string(m["protocol"]),
         digest: m["digest"],
         fence_key: m["fence_key"],
         scripts: scripts
       }}
    end
  end

  defp read(path) do
    case File.read(path) do
      {:ok, b} -> {:ok, b}
      {:error, r} -> {:error, "cannot read #{path}: #{:file.format_error(r)}"}
    end
  end

  defp manifest(raw) do
    case EchoMQ.JSON.decode(raw) do
      {:ok, %{"scripts" => list, "bundle" => v, "protocol" => p, "digest" => d} = m}
      when is_list(list) and is_binary(v) and is_binary(d) ->
        if to_string(p) == @protocol,
          do: {:ok, m},
          else: {:error, "manifest protocol #{inspect(p)} is not this connector's #{@protocol}"}

      {:ok, _} ->
        {:error, "manifest.json lacks bundle, protocol, digest or scripts"}

      {:error, e} ->
        {:error, "manifest.json is not JSON: #{e}"}
    end
  end

  defp scripts(dir, entries) do
    by_name = Map.new(entries, fn e -> {e["name"], e} end)

    Enum.reduce_while(@order, {:ok, %{}}, fn name, {:ok, acc} ->
      with {:entry, %{"file" => file, "sha1" => sha}} <- {:entry, by_name[name]},
           {:ok, src} <- read(Path.join(dir, file)),
           ^sha <- sha1(src) do
        {:cont, {:ok, Map.put(acc, name, %{name: name, sha: sha, source: src})}}
      else
        {:entry, _} -> {:halt, {:error, "manifest has no script #{name}"}}
        {:error, e} -> {:halt, {:error, e}}
        got -> {:halt, {:error, "script #{name}: sha1 #{got} differs from the manifest's"}}
      end
    end)
  end

  defp check_digest(m, scripts) do
    got = @order |> Enum.map_join("\n", &scripts[&1].sha) |> sha1()
    if got == m["digest"], do: :ok, else: {:error, "digest #{got} differs from the manifest's #{m["digest"]}"}
  end

  defp check_claim(scripts) do
    if scripts["claim"].sha == @claim_sha,
      do: :ok,
      else: {:error, "claim is frozen at #{@claim_sha}, the bundle has #{scripts["claim"].sha}"}
  end

  def sha1(bin), do: :crypto.hash(:sha, bin) |> Base.encode16(case: :lower)

  @doc "name => sha, as `hello` announces them (R5.3)."
  def shas(%__MODULE__{scripts: s}), do: Map.new(s, fn {n, %{sha: sha}} -> {n, sha} end)
end
